// DecodedHash read whole, in HSCAN chunks and by HMGET (store.h).
#include "ftmaster/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "proto/codec.h"

namespace ft::master {
namespace {

using redis::Reply;

std::string Member(int rank, const std::string& state = "running") {
  proto::Membership m;
  m.rank = rank;
  m.node = "n0";
  m.state = state;
  return proto::Encode(m);
}

Reply Pairs(const std::vector<std::pair<int, std::string>>& pairs) {
  std::vector<Reply> flat;
  for (const auto& [rank, value] : pairs) {
    flat.push_back(Reply::String(std::to_string(rank)));
    flat.push_back(Reply::String(value));
  }
  return Reply::Array(std::move(flat));
}

std::vector<int> Ranks(const DecodedHash<proto::Membership>& h) {
  std::vector<int> out;
  for (const proto::Membership& m : h.values()) out.push_back(m.rank);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(DecodedHashTest, AWholeReadRemovesWhatIsGoneAndSkipsUnchangedBytes) {
  BadValues bad;
  DecodedHash<proto::Membership> h("ranks");
  h.Load(Pairs({{0, Member(0)}, {1, Member(1)}}), &bad);
  EXPECT_EQ(Ranks(h), (std::vector<int>{0, 1}));
  EXPECT_EQ(h.changed(), 2u);
  const uint64_t v = h.version();
  h.Load(Pairs({{0, Member(0)}, {1, Member(1)}}), &bad);
  EXPECT_EQ(h.changed(), 0u);
  EXPECT_EQ(h.version(), v);
  h.Load(Pairs({{1, Member(1, "exited")}}), &bad);
  EXPECT_EQ(Ranks(h), std::vector<int>{1});
  EXPECT_EQ(h.values()[0].state, "exited");
  EXPECT_GT(h.version(), v);
}

TEST(DecodedHashTest, ChunkedPassesEndLikeAWholeRead) {
  BadValues bad;
  DecodedHash<proto::Membership> h("ranks");
  h.Load(Pairs({{0, Member(0)}, {1, Member(1)}, {2, Member(2)}}), &bad);
  const uint64_t v = h.version();
  // A pass in two chunks (one field twice, as HSCAN may) that no longer holds rank 1.
  h.BeginPass();
  h.LoadPairs(Pairs({{2, Member(2)}, {0, Member(0)}}), &bad);
  EXPECT_EQ(Ranks(h), (std::vector<int>{0, 1, 2}));  // nothing removed mid-pass
  h.LoadPairs(Pairs({{2, Member(2)}, {3, Member(3)}}), &bad);
  h.EndPass();
  EXPECT_EQ(Ranks(h), (std::vector<int>{0, 2, 3}));
  EXPECT_GT(h.version(), v);
  // An unchanged pass changes nothing.
  const uint64_t w = h.version();
  h.BeginPass();
  h.LoadPairs(Pairs({{0, Member(0)}, {2, Member(2)}, {3, Member(3)}}), &bad);
  h.EndPass();
  EXPECT_EQ(h.version(), w);
  EXPECT_EQ(h.changed(), 0u);
}

TEST(DecodedHashTest, FieldReadsTouchOnlyTheirFields) {
  BadValues bad;
  DecodedHash<proto::Membership> h("ranks");
  h.Load(Pairs({{0, Member(0)}, {1, Member(1)}}), &bad);
  // HMGET 1 5 7: 1 changed, 5 new, 7 absent (nil); 0 is not asked about and stays.
  h.LoadFields({"1", "5", "7"},
               Reply::Array({Reply::String(Member(1, "exited")), Reply::String(Member(5)),
                             Reply::Nil()}),
               &bad);
  EXPECT_EQ(Ranks(h), (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(h.changed(), 2u);
  // A nil for a field held removes it; a garbled value is reported and skipped.
  h.LoadFields({"0", "5"}, Reply::Array({Reply::Nil(), Reply::String("{\"v\":1")}), &bad);
  EXPECT_EQ(Ranks(h), std::vector<int>{1});
  EXPECT_EQ(bad.count(), 1u);
  // A reply that does not match the fields asked is reported and changes nothing.
  h.LoadFields({"1", "2"}, Reply::Array({Reply::Nil()}), &bad);
  EXPECT_EQ(Ranks(h), std::vector<int>{1});
  EXPECT_EQ(bad.count(), 2u);
}

// A summary whose op kind is garbled (not a name: a newer writer's unknown name is `other`) is
// skipped and said once, naming the field; its rank's good neighbours are read; the same bytes again are not
// decoded (or reported) again, and a rewritten good value is taken.
TEST(DecodedHashTest, AGarbledOpKindSkipsItsRowAndIsReportedOnce) {
  auto summary = [](int rank, const char* op) {
    proto::RankSummary s;
    s.rank = rank;
    s.node = "n0";
    s.unix_ms = 1;
    s.ops.push_back(proto::OpSummary{0x1, proto::OpKind::kAllReduce, 2, 5, 1.0, 2.0, 3.0, 9});
    std::string text = proto::Encode(s);
    text.replace(text.find(R"("op":"allreduce")"), 16, std::string(R"("op":")") + op + "\"");
    return text;
  };
  BadValues bad;
  DecodedHash<proto::RankSummary> h("summary");
  h.Load(Pairs({{0, summary(0, "allreduce")}, {1, summary(1, "tele port")}}), &bad);
  ASSERT_EQ(h.values().size(), 1u);
  EXPECT_EQ(h.values()[0].rank, 0);
  EXPECT_EQ(h.values()[0].ops.at(0).op, proto::OpKind::kAllReduce);
  EXPECT_EQ(bad.count(), 1u);
  EXPECT_FALSE(bad.Report("summary field 1", summary(1, "tele port"), Status::Corrupt("again"))) << "logged once";
  h.Load(Pairs({{0, summary(0, "allreduce")}, {1, summary(1, "tele port")}}), &bad);
  EXPECT_EQ(bad.count(), 2u) << "the same bytes are not decoded again (the one count is the test's own)";
  h.Load(Pairs({{0, summary(0, "allreduce")}, {1, summary(1, "recv")}}), &bad);
  EXPECT_EQ(h.values().size(), 2u);
}

}  // namespace
}  // namespace ft::master

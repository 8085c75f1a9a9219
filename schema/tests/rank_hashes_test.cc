// Each rank hash's maker and reader meet: what SetProgress / SetSummary / SetMembership write,
// through the in-memory Redis, reads back as the same record; a value under another rank's field,
// a garbled value and a reply that is no hash come back with why. (The copy scripts run on a real
// redis-server: worker.ReporterE2eTest.)
#include "schema/rank_hashes.h"

#include <gtest/gtest.h>

#include "proto/codec.h"
#include "redis/fake/fake_store.h"

namespace ft::schema {
namespace {

class RankHashesTest : public ::testing::Test {
 protected:
  RankHashesTest() : store_(&server_) { EXPECT_TRUE(store_.Ensure(std::chrono::steady_clock::now())); }

  redis::Reply Run(const redis::Argv& argv) {
    redis::Reply r = server_.Execute(argv);
    EXPECT_FALSE(r.is_error()) << r.DebugString();
    return r;
  }

  static proto::Membership Member(int rank, const char* node) {
    proto::Membership m;
    m.rank = rank;
    m.node = node;
    m.pid = 100 + rank;
    return m;
  }

  redis::FakeRedis server_;
  redis::FakeStore store_;
  proto::Keys keys_{"j"};
};

TEST_F(RankHashesTest, AMembershipReadsBackWholeAndByRank) {
  Run(SetMembership(keys_, Member(3, "n1")));
  Run(SetMembership(keys_, Member(5, "n2")));

  std::vector<HashValue<proto::Membership>> all;
  ASSERT_TRUE(DecodeRankHash(Run({"HGETALL", keys_.Ranks()}), &all).ok());
  ASSERT_EQ(all.size(), 2u);
  for (const auto& v : all) {
    ASSERT_TRUE(v.ok()) << v.why.message();
    EXPECT_EQ(v.field, RankField(v.value.rank));
    EXPECT_EQ(proto::Encode(v.value), proto::Encode(Member(v.value.rank, v.value.rank == 3 ? "n1" : "n2")));
  }

  std::vector<HashValue<proto::Membership>> some;
  const std::vector<int> ranks = {5, 4, 3};
  ASSERT_TRUE(DecodeRankFields(ranks, Run(GetRanks(keys_.Ranks(), ranks)), &some).ok());
  ASSERT_EQ(some.size(), 2u) << "rank 4 is not held";
  EXPECT_EQ(some[0].value.rank, 5);
  EXPECT_EQ(some[1].value.rank, 3);
}

// The readers' commands read what the makers wrote: every membership, one rank's, the version;
// a rank's progress from its group's hash; a step's copies, their count and the newest steps.
TEST_F(RankHashesTest, TheReadersCommandsReadWhatTheMakersWrote) {
  Run(SetMembership(keys_, Member(3, "n1")));
  Run(BumpRanksVersion(keys_));
  Run(SetMembership(keys_, Member(9000, "n7")));
  Run(BumpRanksVersion(keys_));
  std::vector<HashValue<proto::Membership>> all;
  ASSERT_TRUE(DecodeRankHash(Run(GetMemberships(keys_)), &all).ok());
  EXPECT_EQ(all.size(), 2u);
  const redis::Reply one = Run(GetMembership(keys_, 9000));
  ASSERT_TRUE(one.is_string());
  proto::Membership m;
  ASSERT_TRUE(DecodeRankValue(RankField(9000), one.str(), &m).ok());
  EXPECT_EQ(m.node, "n7");
  EXPECT_EQ(Run(GetRanksVersion(keys_)).str(), "2");

  proto::RankProgress p;
  p.rank = 9000;
  p.pid = 17;
  p.node = "n7";
  p.state = "running";
  Run(SetProgress(keys_, p));
  const redis::Reply progress = Run(GetProgress(keys_, 9000));
  ASSERT_TRUE(progress.is_string()) << "read from rank 9000's group, where SetProgress wrote it";
  proto::RankProgress read;
  ASSERT_TRUE(DecodeRankValue(RankField(9000), progress.str(), &read).ok()) << progress.str();
  EXPECT_EQ(read.pid, 17);

  // The copy scripts do not run here: their effect written by hand (a copy in the step's hash,
  // the step in ckpt:steps).
  for (int64_t step : {10, 20, 30}) {
    proto::CkptCopy c;
    c.rank = 1;
    c.step = step;
    c.node = "n1";
    c.digest = 0xabc;
    c.bytes = 4096;
    Run({"HSET", keys_.CkptStep(step), RankField(1), proto::Encode(c)});
    Run({"ZADD", keys_.CkptSteps(), std::to_string(step), std::to_string(step)});
  }
  EXPECT_EQ(Run(CountCopies(keys_, 20)).integer(), 1);
  EXPECT_EQ(Run(CountBuddyCopies(keys_, 20)).integer(), 0);
  std::vector<HashValue<proto::CkptCopy>> copies;
  ASSERT_TRUE(DecodeRankHash(Run(GetCopies(keys_, 20)), &copies).ok());
  ASSERT_EQ(copies.size(), 1u);
  ASSERT_TRUE(copies[0].ok()) << copies[0].why.message();
  EXPECT_EQ(copies[0].value.step, 20);
  EXPECT_TRUE(Run(GetBuddyCopies(keys_, 20)).size() == 0);
  const redis::Reply two = Run(NewestSteps(keys_, 2));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].str(), "30");
  EXPECT_EQ(two[1].str(), "20");
  EXPECT_EQ(Run(NewestSteps(keys_, 0)).size(), 3u) << "no count: every step";

  EXPECT_TRUE(Run(GetRewinds(keys_)).is_nil());
  proto::CkptRewinds rewinds;
  rewinds.rewinds.push_back({20, 1700000000000, "a relaunch restored step 20"});
  Run(SetRewinds(keys_, rewinds));
  const redis::Reply back = Run(GetRewinds(keys_));
  ASSERT_TRUE(back.is_string());
  proto::CkptRewinds decoded;
  ASSERT_TRUE(proto::Decode(back.str(), &decoded).ok());
  EXPECT_EQ(decoded.rewinds, rewinds.rewinds);
}

TEST_F(RankHashesTest, ProgressAndSummaryGoToTheirRanksGroupsHash) {
  proto::RankProgress p;
  p.rank = 7;
  p.node = "n1";
  p.state = "running";
  Run(SetProgress(keys_, p));
  proto::RankSummary s;
  s.rank = 7;
  s.node = "n1";
  Run(SetSummary(keys_, s));

  proto::RankProgress got_p;
  const redis::Reply raw_p = Run({"HGET", keys_.ProgressOf(7), RankField(7)});
  ASSERT_TRUE(raw_p.is_string());
  const Status why = DecodeRankValue(RankField(7), raw_p.str(), &got_p);
  ASSERT_TRUE(why.ok()) << why.message();
  EXPECT_EQ(proto::Encode(got_p), proto::Encode(p));
  proto::RankSummary got_s;
  const redis::Reply raw_s = Run({"HGET", keys_.SummaryOf(7), RankField(7)});
  ASSERT_TRUE(raw_s.is_string());
  const Status why_s = DecodeRankValue(RankField(7), raw_s.str(), &got_s);
  EXPECT_TRUE(why_s.ok()) << why_s.message();
}

TEST_F(RankHashesTest, AValueUnderAnotherRanksFieldOrGarbledIsReturnedWithWhy) {
  Run({"HSET", keys_.Ranks(), "4", proto::Encode(Member(3, "n1"))});  // rank 3's value under 4
  Run({"HSET", keys_.Ranks(), "6", "{not json"});
  Run({"HSET", keys_.Ranks(), "x", proto::Encode(Member(1, "n1"))});
  Run(SetMembership(keys_, Member(8, "n1")));

  std::vector<HashValue<proto::Membership>> all;
  ASSERT_TRUE(DecodeRankHash(Run({"HGETALL", keys_.Ranks()}), &all).ok());
  ASSERT_EQ(all.size(), 4u) << "every field is returned, decoded or not";
  int good = 0;
  for (const auto& v : all) {
    if (v.ok()) {
      ++good;
      EXPECT_EQ(v.value.rank, 8);
      continue;
    }
    EXPECT_FALSE(v.raw.empty()) << "a bad value keeps its bytes, for the log: field " << v.field;
    if (v.field == "4") {
      EXPECT_NE(v.why.message().find("rank 3"), std::string::npos) << v.why.message();
    }
  }
  EXPECT_EQ(good, 1);
}

TEST_F(RankHashesTest, AReplyThatIsNoHashIsAnError) {
  std::vector<HashValue<proto::Membership>> out;
  EXPECT_TRUE(DecodeRankHash(redis::Reply(), &out).ok()) << "nil: the hash is not there";
  EXPECT_FALSE(DecodeRankHash(redis::Reply::Integer(3), &out).ok());
  EXPECT_FALSE(DecodeRankHash(redis::Reply::Array({redis::Reply::String("1")}), &out).ok()) << "odd length";
  EXPECT_FALSE(DecodeRankFields({1, 2}, redis::Reply::Array({redis::Reply()}), &out).ok()) << "one value short";
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace ft::schema

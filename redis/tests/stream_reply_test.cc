// ParseStream and ParseStreamId (stream_reply.h): the one reader of stream entries.
#include "redis/stream_reply.h"

#include <gtest/gtest.h>

namespace ft::redis {
namespace {

Reply Entry(const std::string& id, std::vector<std::string> fields) {
  std::vector<Reply> values;
  for (std::string& f : fields) values.push_back(Reply::String(std::move(f)));
  return Reply::Array({Reply::String(id), Reply::Array(std::move(values))});
}

TEST(StreamReplyTest, EntriesKeepTheirIdAndFieldsInOrder) {
  const Reply reply = Reply::Array({Entry("1-0", {"kind", "save", "json", "{}"}), Entry("2-5", {})});
  std::vector<StreamEntry> entries;
  EXPECT_EQ(ParseStream(reply, &entries), 0u);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].id, "1-0");
  ASSERT_NE(entries[0].Get("json"), nullptr);
  EXPECT_EQ(*entries[0].Get("json"), "{}");
  EXPECT_EQ(entries[0].Get("missing"), nullptr);
  EXPECT_EQ(entries[0].Flat(), (std::vector<std::string>{"kind", "save", "json", "{}"}));
  EXPECT_TRUE(entries[1].fields.empty());
}

TEST(StreamReplyTest, MalformedEntriesAreSkippedAndCounted) {
  const Reply odd = Reply::Array({Reply::String("3-0"), Reply::Array({Reply::String("lonely")})});
  const Reply no_id = Reply::Array({Reply::Integer(4), Reply::Array({})});
  const Reply reply = Reply::Array({Reply::String("not an entry"), odd, no_id, Entry("5-0", {"a", "b"})});
  std::vector<StreamEntry> entries;
  EXPECT_EQ(ParseStream(reply, &entries), 3u);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].id, "5-0");
  EXPECT_EQ(ParseStream(Reply::Nil(), &entries), 0u) << "no entries: nothing read";
}

TEST(StreamReplyTest, StreamIdsSplitIntoMillisecondsAndSequence) {
  uint64_t ms = 0, seq = 0;
  EXPECT_TRUE(ParseStreamId("1700000000000-5", &ms, &seq));
  EXPECT_EQ(ms, 1700000000000u);
  EXPECT_EQ(seq, 5u);
  for (const char* bad : {"", "-", "17-", "-5", "17", "17-5x", "a-1", "1--2"}) {
    EXPECT_FALSE(ParseStreamId(bad, &ms, &seq)) << bad;
  }
}

}  // namespace
}  // namespace ft::redis

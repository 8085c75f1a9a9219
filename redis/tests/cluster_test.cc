// The Redis Cluster client's pure parts: CRC16 and hash slots against the values Redis
// documents (and a redis-server 7.0 computes), which keys decide a command's slot, the
// cross-slot check, parsing CLUSTER SLOTS, and the cluster URL.
#include "redis/cluster.h"

#include <gtest/gtest.h>

#include "redis/url.h"

namespace ft::redis {
namespace {

TEST(ClusterSlotTest, Crc16IsXmodem) {
  // The check value of CRC-16/XMODEM, as the Redis Cluster specification gives it.
  EXPECT_EQ(Crc16("123456789"), 0x31C3);
  EXPECT_EQ(Crc16(""), 0);
}

TEST(ClusterSlotTest, KeySlotMatchesRedis) {
  // CLUSTER KEYSLOT on redis-server 7.0.15; the first two are in the command's documentation.
  EXPECT_EQ(KeySlot("somekey"), 11058);
  EXPECT_EQ(KeySlot("foo{hash_tag}"), 2515);
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("hello"), 866);
  EXPECT_EQ(KeySlot("ft:{job-1}:events"), 12685);
}

TEST(ClusterSlotTest, HashTagRules) {
  // The specification's examples: the first '{' and the next '}' with something between.
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{user1000}.following"), 3443);
  EXPECT_EQ(KeySlot("foo{}{bar}"), 8363);        // empty tag: the whole key
  EXPECT_EQ(KeySlot("foo{}{bar}"), Crc16("foo{}{bar}") & 16383);
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), 4015);     // the tag is "{bar"
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));  // the first tag only
  EXPECT_EQ(KeySlot("{"), 4092);                 // no closing brace: the whole key
}

TEST(ClusterSlotTest, WhichArgumentsAreKeys) {
  EXPECT_EQ(CommandKeys({"HSET", "k", "f", "v"}), (std::vector<size_t>{1}));
  EXPECT_EQ(CommandKeys({"PING"}), (std::vector<size_t>{}));
  EXPECT_EQ(CommandKeys({"CLUSTER", "SLOTS"}), (std::vector<size_t>{}));
  EXPECT_EQ(CommandKeys({"EVAL", "return 1", "2", "a", "b", "arg"}), (std::vector<size_t>{3, 4}));
  EXPECT_EQ(CommandKeys({"EVAL", "return 1", "0", "arg"}), (std::vector<size_t>{}));
  EXPECT_EQ(CommandKeys({"del", "a", "b"}), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(CommandKeys({"MSET", "a", "1", "b", "2"}), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(CommandKeys({"XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"}),
            (std::vector<size_t>{4, 5}));
}

TEST(ClusterSlotTest, MultiKeyCommandsMustStayInOneSlot) {
  int slot = -2;
  ASSERT_TRUE(CommandSlot({"DEL", "ft:{J}:a", "ft:{J}:b"}, &slot).ok());
  EXPECT_EQ(slot, KeySlot("J"));
  ASSERT_TRUE(CommandSlot({"PING"}, &slot).ok());
  EXPECT_EQ(slot, -1);
  Status s = CommandSlot({"DEL", "ft:{J}:a", "ft:{J:g1}:progress"}, &slot);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ft:{J:g1}:progress"), std::string_view::npos) << s.ToString();
  // A script's KEYS decide; its arguments do not.
  ASSERT_TRUE(CommandSlot({"EVAL", "x", "1", "ft:{J}:leader", "ft:{K}:other"}, &slot).ok());
  EXPECT_EQ(slot, KeySlot("J"));
  EXPECT_FALSE(CommandSlot({"EVAL", "x", "2", "ft:{J}:leader", "ft:{K}:other"}, &slot).ok());
}

TEST(ClusterSlotTest, ParsesClusterSlots) {
  // Redis 7: [first, last, [host, port, id, {hostname}], replicas...]; "" is the node asked.
  Reply reply = Reply::Array({
      Reply::Array({Reply::Integer(0), Reply::Integer(5460),
                    Reply::Array({Reply::String("127.0.0.1"), Reply::Integer(7000), Reply::String("id0")}),
                    Reply::Array({Reply::String("127.0.0.1"), Reply::Integer(7003), Reply::String("id3")})}),
      Reply::Array({Reply::Integer(5461), Reply::Integer(16383),
                    Reply::Array({Reply::String(""), Reply::Integer(7001), Reply::String("id1")})}),
  });
  std::vector<SlotRange> ranges;
  ASSERT_TRUE(ParseClusterSlots(reply, "10.0.0.9", &ranges).ok());
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].last, 5460);
  EXPECT_EQ(ranges[0].host, "127.0.0.1");
  EXPECT_EQ(ranges[0].port, 7000);
  EXPECT_EQ(ranges[1].host, "10.0.0.9");
  EXPECT_EQ(ranges[1].port, 7001);

  EXPECT_EQ(ParseClusterSlots(Reply::Error("ERR This instance has cluster support disabled"), "h",
                              &ranges).code(),
            StatusCode::kCorrupt);
  Reply bad = Reply::Array({Reply::Array({Reply::Integer(0), Reply::Integer(20000),
                                          Reply::Array({Reply::String("h"), Reply::Integer(1)})})});
  EXPECT_EQ(ParseClusterSlots(bad, "h", &ranges).code(), StatusCode::kCorrupt);
  Reply short_range = Reply::Array({Reply::Array({Reply::Integer(0), Reply::Integer(1)})});
  EXPECT_EQ(ParseClusterSlots(short_range, "h", &ranges).code(), StatusCode::kCorrupt);
}

TEST(ClusterUrlTest, SeedsUserAndPassword) {
  Endpoint ep;
  ASSERT_TRUE(ParseUrl("redis+cluster://ft:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002", &ep).ok());
  EXPECT_TRUE(ep.cluster);
  ASSERT_EQ(ep.seeds.size(), 3u);
  EXPECT_EQ(ep.seeds[0], (HostPort{"10.0.0.1", 7000}));
  EXPECT_EQ(ep.seeds[1], (HostPort{"10.0.0.2", 6379}));
  EXPECT_EQ(ep.seeds[2], (HostPort{"::1", 7002}));
  EXPECT_EQ(ep.host, "10.0.0.1");
  EXPECT_EQ(ep.port, 7000);
  EXPECT_EQ(ep.user, "ft");
  EXPECT_EQ(ep.password, "pw");
  EXPECT_EQ(Redacted(ep), "redis+cluster://ft:***@10.0.0.1:7000,10.0.0.2:6379,[::1]:7002");

  ASSERT_TRUE(ParseUrl("redis://h:1", &ep).ok());
  EXPECT_FALSE(ep.cluster);
  EXPECT_TRUE(ep.seeds.empty());
}

TEST(ClusterUrlTest, BadClusterUrls) {
  Endpoint ep;
  Status s = ParseUrl("redis+cluster://h:1/2", &ep);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("database 0"), std::string_view::npos) << s.ToString();
  s = ParseUrl("redis+cluster://u:secret@h:1,,h:2", &ep);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().find("secret"), std::string_view::npos) << s.ToString();
  s = ParseUrl("redis+cluster://u:secret@h:1,h:99999", &ep);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().find("secret"), std::string_view::npos) << s.ToString();
  EXPECT_FALSE(ParseUrl("redis+cluster://", &ep).ok());
}

}  // namespace
}  // namespace ft::redis

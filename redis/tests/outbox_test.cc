// The outbox's bookkeeping without a server (flushing against a real one: outbox_e2e_test.cc).
#include "redis/outbox.h"

#include <gtest/gtest.h>

#include "redis/client.h"

namespace ft::redis {
namespace {

TEST(OutboxTest, OverflowDropsTheOldestAppends) {
  Outbox box(3);
  for (int i = 0; i < 5; ++i) box.Append({"XADD", "s", "*", "i", std::to_string(i)});
  EXPECT_EQ(box.pending_appends(), 3u);
  EXPECT_EQ(box.dropped(), 2u);
}

TEST(OutboxTest, PutsCoalescePerSlot) {
  Outbox box(10);
  box.Put("rank:1", {"HSET", "h", "1", "a"});
  box.Put("rank:1", {"HSET", "h", "1", "b"});
  box.Put("rank:2", {"HSET", "h", "2", "c"});
  box.Put("rank:1", {"HSET", "h", "1", "d"});
  EXPECT_EQ(box.pending_puts(), 2u);
  EXPECT_EQ(box.coalesced(), 2u);
  EXPECT_EQ(box.dropped(), 0u);
  EXPECT_EQ(box.pending(), 2u);
}

TEST(OutboxTest, TooManySlotsDropTheLeastRecentlyUpdated) {
  Outbox box(2);
  box.Put("a", {"SET", "a", "1"});
  box.Put("b", {"SET", "b", "1"});
  box.Put("a", {"SET", "a", "2"});  // now b is the stalest
  box.Put("c", {"SET", "c", "1"});
  EXPECT_EQ(box.pending_puts(), 2u);
  EXPECT_EQ(box.dropped(), 1u);
}

TEST(OutboxTest, FlushWithoutConnectionKeepsEverything) {
  Outbox box(0);  // taken as 1
  EXPECT_EQ(box.capacity(), 1u);
  box.Append({"PING"});
  box.Put("x", {"PING"});
  Client never_connected;
  Status s = box.Flush(never_connected);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(box.pending(), 2u);
  EXPECT_EQ(box.delivered(), 0u);
  Outbox empty(4);
  EXPECT_TRUE(empty.Flush(never_connected).ok());
}

}  // namespace
}  // namespace ft::redis

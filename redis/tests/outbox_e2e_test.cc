// Outbox against a real redis-server: outages, order, coalescing, overflow, refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "redis/client.h"
#include "redis/outbox.h"
#include "redis/tests/redis_test.h"

namespace ft::redis {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class OutboxE2eTest : public testing::RedisClientTest {
 protected:
  // The "i" field of every entry of a stream, oldest first.
  std::vector<std::string> StreamValues(const std::string& key) {
    Client reader;
    EXPECT_TRUE(reader.Connect(server_.endpoint(), 1000ms).ok());
    Reply r;
    Status s = reader.Run({"XRANGE", key, "-", "+"}, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::vector<std::string> out;
    for (const Reply& entry : r.elements()) {
      const Reply& fields = entry[1];
      out.push_back(fields[1].str());
    }
    return out;
  }

  static Argv Xadd(const std::string& key, int i) {
    return {"XADD", key, "MAXLEN", "~", "100000", "*", "i", std::to_string(i)};
  }

};

TEST_F(OutboxE2eTest, ThousandAppendsSurviveAnOutageInOrder) {
  Outbox box(10000);
  server_.Stop();
  for (int i = 0; i < 1000; ++i) box.Append(Xadd("ft:{t}:events", i));

  // The client does not know yet: the pipeline finds out, and keeps everything.
  Status s = box.Flush(client_);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(box.pending_appends(), 1000u);
  EXPECT_TRUE(client_.broken());
  s = box.Flush(client_);  // and again, now known to be down: fails without trying
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(box.pending_appends(), 1000u);

  ASSERT_TRUE(server_.Restart().ok());
  ASSERT_TRUE(client_.Connect(server_.endpoint(), 1000ms).ok());
  s = box.Flush(client_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(box.empty());
  EXPECT_EQ(box.delivered(), 1000u);
  EXPECT_EQ(box.dropped(), 0u);

  std::vector<std::string> values = StreamValues("ft:{t}:events");
  ASSERT_EQ(values.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(values[static_cast<size_t>(i)], std::to_string(i));
}

TEST_F(OutboxE2eTest, WithAReconnectingClientInADaemonLoop) {
  ReconnectPolicy policy;
  policy.connect_timeout = 300ms;
  policy.io_timeout = 10000ms;
  policy.seed = 11;
  ReconnectingClient rc(server_.endpoint(), policy);
  Outbox box(10000);
  int next = 0;
  auto tick = [&] {
    box.Append(Xadd("s", next++));
    if (rc.Ensure(Clock::now())) (void)box.Flush(rc.client());
  };
  for (int i = 0; i < 50; ++i) tick();
  server_.Stop();
  for (int i = 0; i < 100; ++i) {
    auto start = Clock::now();
    tick();
    // A tick with Redis down costs at most the connect timeout (300 ms), never the io timeout
    // (10 s): the bound between them leaves seconds of margin for a loaded machine.
    EXPECT_LT(Clock::now() - start, 3000ms);
  }
  ASSERT_TRUE(server_.Restart().ok());  // empty: the first 50 are gone with the old server
  auto deadline = Clock::now() + 5s;
  while ((!box.empty() || !rc.connected()) && Clock::now() < deadline) {
    tick();
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(box.empty());
  std::vector<std::string> values = StreamValues("s");
  ASSERT_GE(values.size(), 100u);
  // Everything appended from the outage on arrived, in order (a few may repeat the last
  // entries the old server took, at most once each: at-least-once delivery).
  int expect = std::stoi(values.front());
  EXPECT_LE(expect, 50);
  for (const std::string& v : values) EXPECT_EQ(v, std::to_string(expect++));
  EXPECT_EQ(expect, next);
}

TEST_F(OutboxE2eTest, CoalescingSendsOnlyTheLastPutPerSlot) {
  Outbox box(100);
  box.Put("rank:0", {"INCRBY", "c", "1"});
  box.Put("rank:0", {"INCRBY", "c", "2"});
  box.Put("rank:0", {"INCRBY", "c", "3"});
  box.Put("rank:1", {"INCRBY", "c", "10"});
  box.Put("rank:1", {"HSET", "h", "1", "newest"});
  box.Append({"SET", "order", "append-first"});
  EXPECT_EQ(box.pending(), 3u);
  ASSERT_TRUE(box.Flush(client_).ok());
  Reply r;
  ASSERT_TRUE(client_.Run({"GET", "c"}, &r).ok());
  EXPECT_EQ(r.str(), "3");
  ASSERT_TRUE(client_.Run({"HGET", "h", "1"}, &r).ok());
  EXPECT_EQ(r.str(), "newest");
  EXPECT_EQ(box.delivered(), 3u);
  EXPECT_EQ(box.coalesced(), 3u);
}

TEST_F(OutboxE2eTest, OverflowDropsTheOldestAndCountsThem) {
  Outbox box(10);
  for (int i = 0; i < 25; ++i) box.Append(Xadd("s", i));
  EXPECT_EQ(box.dropped(), 15u);
  ASSERT_TRUE(box.Flush(client_).ok());
  std::vector<std::string> values = StreamValues("s");
  ASSERT_EQ(values.size(), 10u);
  EXPECT_EQ(values.front(), "15");
  EXPECT_EQ(values.back(), "24");
}

TEST_F(OutboxE2eTest, ARefusedWriteIsDroppedAndDoesNotBlockTheRest) {
  Reply r;
  ASSERT_TRUE(client_.Run({"SET", "not-a-stream", "x"}, &r).ok());
  Outbox box(100);
  box.Append(Xadd("s", 0));
  box.Append(Xadd("not-a-stream", 1));
  box.Append(Xadd("s", 2));
  box.Put("p", {"HSET", "not-a-stream", "f", "v"});
  Status s = box.Flush(client_);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(box.empty());
  EXPECT_EQ(box.rejected(), 2u);
  EXPECT_EQ(box.delivered(), 2u);
  EXPECT_EQ(StreamValues("s"), (std::vector<std::string>{"0", "2"}));
}

TEST_F(OutboxE2eTest, FlushInBoundedBatches) {
  Outbox box(100);
  for (int i = 0; i < 12; ++i) box.Append(Xadd("s", i));
  box.Put("p", {"SET", "p", "1"});
  ASSERT_TRUE(box.Flush(client_, 5).ok());
  EXPECT_EQ(box.pending(), 8u);
  ASSERT_TRUE(box.Flush(client_, 5).ok());
  ASSERT_TRUE(box.Flush(client_, 5).ok());
  EXPECT_TRUE(box.empty());
  EXPECT_EQ(StreamValues("s").size(), 12u);
  Reply r;
  ASSERT_TRUE(client_.Run({"GET", "p"}, &r).ok());
  EXPECT_EQ(r.str(), "1");
}

}  // namespace
}  // namespace ft::redis

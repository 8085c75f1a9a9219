// MasterWatch against a real redis-server: the blocking read on the node's command stream and
// the job's notify stream (proto/notice.h), what it reports, and that a garbled notice is
// passed over.
#include "ftworker/master_watch.h"

#include <gtest/gtest.h>

#include <chrono>

#include "proto/notice.h"
#include "redis/redis_store.h"
#include "redis/tests/redis_test.h"
#include "tests/util/wait_until.h"

namespace ft::worker {
namespace {

using namespace std::chrono_literals;

class MasterWatchTest : public redis::testing::RedisClientTest {
 protected:
  std::unique_ptr<MasterWatch> Watch() {
    auto store = std::make_unique<redis::RedisStore>(
        server_.endpoint(), redis::ReconnectPolicy{.connect_timeout = 500ms, .io_timeout = 5000ms});
    return std::make_unique<MasterWatch>(keys_, "n0", std::move(store), 3000ms);
  }

  void Add(const std::string& key, std::vector<std::string> fields) {
    redis::Argv argv{"XADD", key, "*"};
    argv.insert(argv.end(), fields.begin(), fields.end());
    redis::Reply r;
    ASSERT_TRUE(client_.Run(argv, &r).ok());
  }

  // The news that arrives within 5 s and satisfies `has`, merged over every Take.
  MasterNews WaitFor(MasterWatch& watch, bool (*has)(const MasterNews&)) {
    MasterNews all;
    test_util::WaitUntil([&] {
      MasterNews n = watch.Take();
      all.everything |= n.everything;
      all.commands |= n.commands;
      all.timeouts |= n.timeouts;
      all.restore |= n.restore;
      all.secret |= n.secret;
      if (n.window_open) {
        all.window_open = n.window_open;
        all.window = n.window;
      }
      return has(all);
    }, 5s);
    return all;
  }

  proto::Keys keys_{"job"};
};

TEST_F(MasterWatchTest, HearsCommandsAndEveryKindOfNoticeAtOnce) {
  Add(keys_.Commands("n0"), {"json", "{}"});  // before the watch: not news, the first poll reads it
  auto watch = Watch();
  ASSERT_TRUE(test_util::WaitUntil([&] { return watch->listening(); }, 5s));
  EXPECT_TRUE(WaitFor(*watch, [](const MasterNews& n) { return n.everything; }).everything)
      << "a (re)connection asks the daemon to read everything once";
  EXPECT_FALSE(watch->Take().any());

  const auto t0 = std::chrono::steady_clock::now();
  Add(keys_.Commands("n0"), {"json", "{}"});
  EXPECT_TRUE(WaitFor(*watch, [](const MasterNews& n) { return n.commands; }).commands);
  // Well inside the block (3 s here): the read answered when the entry came, not at its end.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2500ms);

  Add(keys_.Notify(), proto::NoticeFields(proto::NoticeOf(proto::NoticeKind::kTimeouts)));
  Add(keys_.Notify(), {"kind", "reboot"});  // garbled: passed over, the rest still heard
  Add(keys_.Notify(), proto::NoticeFields(proto::NoticeOf(proto::NoticeKind::kRestore)));
  Add(keys_.Notify(), proto::NoticeFields(proto::NoticeOf(proto::NoticeKind::kSecret)));
  proto::Notice open;
  open.kind = proto::NoticeKind::kWindow;
  open.open = true;
  open.window = "1-1";
  Add(keys_.Notify(), proto::NoticeFields(open));
  MasterNews n = WaitFor(*watch, [](const MasterNews& n) {
    return n.timeouts && n.restore && n.secret && n.window_open.has_value();
  });
  EXPECT_TRUE(n.timeouts);
  EXPECT_TRUE(n.restore);
  EXPECT_TRUE(n.secret);
  ASSERT_TRUE(n.window_open.has_value());
  EXPECT_TRUE(*n.window_open);
  EXPECT_EQ(n.window, "1-1");
  EXPECT_FALSE(n.commands) << "the command stream did not move";

  open.open = false;
  Add(keys_.Notify(), proto::NoticeFields(open));
  n = WaitFor(*watch, [](const MasterNews& n) { return n.window_open.has_value(); });
  ASSERT_TRUE(n.window_open.has_value());
  EXPECT_FALSE(*n.window_open);
}

TEST_F(MasterWatchTest, IsNotListeningWhileRedisIsAway) {
  auto watch = Watch();
  ASSERT_TRUE(test_util::WaitUntil([&] { return watch->listening(); }, 5s));
  server_.Stop();
  EXPECT_TRUE(test_util::WaitUntil([&] { return !watch->listening(); }, 10s))
      << "the daemon must fall back to polling and writing every table";
}

}  // namespace
}  // namespace ft::worker

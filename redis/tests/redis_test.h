// gtest fixtures over a real redis-server (redis_server.h): what every suite against a live
// server otherwise writes in its own SetUp. RedisServerTest starts the server (loopback, free
// port, random password, temp dir; stopped and removed by its destructor); RedisClientTest also
// connects one Client to it for the test's own reads and writes. A suite with more to set up
// overrides SetUp and calls the base's first (a fatal failure there skips the test body).
// Header-only: link ft_redis_testing and gtest.
#ifndef FT_REDIS_TESTS_REDIS_TEST_H_
#define FT_REDIS_TESTS_REDIS_TEST_H_

#include <gtest/gtest.h>

#include <chrono>

#include "common/status.h"
#include "redis/client.h"
#include "redis/tests/redis_server.h"

namespace ft::redis::testing {

class RedisServerTest : public ::testing::Test {
 protected:
  explicit RedisServerTest(RedisServerOptions options = {}) : server_(std::move(options)) {}

  void SetUp() override {
    Status s = server_.Start();
    ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << server_.LogTail();
  }

  RedisServer server_;
};

class RedisClientTest : public RedisServerTest {
 protected:
  using RedisServerTest::RedisServerTest;

  void SetUp() override {
    RedisServerTest::SetUp();
    if (HasFatalFailure()) return;
    Status s = client_.Connect(server_.endpoint(), std::chrono::milliseconds(1000));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  Client client_;
};

}  // namespace ft::redis::testing

#endif  // FT_REDIS_TESTS_REDIS_TEST_H_

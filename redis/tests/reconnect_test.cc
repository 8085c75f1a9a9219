// ReconnectingClient's schedule and blocking bounds, against addresses where nothing answers:
// no redis-server needed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "redis/client.h"
#include "redis/tests/redis_server.h"

namespace ft::redis {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Endpoint Refusing() {
  Endpoint ep;
  ep.host = "127.0.0.1";
  ep.port = testing::UnusedPort();
  ep.password = "hunter2-secret";
  return ep;
}

// Accepts TCP connections (the kernel does, from the backlog) and never says a word: a hung
// Redis host.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(ClientTest, RefusedConnectionIsUnavailableAndNamesTheAddress) {
  Endpoint ep = Refusing();
  Client c;
  auto start = Clock::now();
  // Refused at once, not after the timeout: a 5 s timeout and a 2.5 s bound leave seconds
  // for a loaded machine to deschedule us.
  Status s = c.Connect(ep, 5000ms);
  EXPECT_LT(Clock::now() - start, 2500ms);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(ep.port)), std::string_view::npos)
      << s.message();
  EXPECT_EQ(s.ToString().find("hunter2"), std::string::npos);
  EXPECT_FALSE(c.connected());
  EXPECT_FALSE(c.broken());
  Reply r;
  EXPECT_EQ(c.Run({"PING"}, &r).code(), StatusCode::kUnavailable);
  std::vector<Reply> replies;
  EXPECT_EQ(c.Pipeline({{"PING"}}, &replies).code(), StatusCode::kUnavailable);
  EXPECT_EQ(c.Run({}, &r).code(), StatusCode::kInvalidArgument);
}

TEST(ClientTest, SilentServerTimesOutWithinTheConnectTimeout) {
  SilentListener silent;
  Endpoint ep;
  ep.host = "127.0.0.1";
  ep.port = silent.port();
  ep.password = "hunter2-secret";
  Client c;
  auto start = Clock::now();
  Status s = c.Connect(ep, 300ms, 10000ms);
  auto took = Clock::now() - start;
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_GE(took, 250ms);
  // The handshake shares the connect timeout (300 ms): no io_timeout (10 s) per step. The
  // bound between the two leaves seconds of margin for a loaded machine.
  EXPECT_LT(took, 3000ms);
  EXPECT_EQ(s.ToString().find("hunter2"), std::string::npos);
  EXPECT_FALSE(c.connected());
}

TEST(ReconnectTest, BackoffDoublesToTheCapWithJitter) {
  ReconnectPolicy policy;
  policy.connect_timeout = 500ms;
  policy.seed = 7;
  ReconnectingClient rc(Refusing(), policy);
  // The next attempt is due `backoff` after the end of the last one: what an attempt took is
  // measured here, so the bound holds however long a loaded machine stalls it.
  auto attempt = [&rc](Clock::time_point now) {
    const auto start = Clock::now();
    EXPECT_FALSE(rc.Ensure(now));
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  };
  Clock::time_point t = Clock::now();
  std::chrono::milliseconds took = attempt(t);  // the first attempt goes at once
  EXPECT_EQ(rc.attempts(), 1u);
  EXPECT_EQ(rc.failures(), 1);
  EXPECT_EQ(rc.last_error().code(), StatusCode::kUnavailable);

  // Not due yet: returns without trying.
  EXPECT_FALSE(rc.Ensure(t + 50ms));
  EXPECT_EQ(rc.attempts(), 1u);

  const int64_t expected_ms[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000};
  for (int64_t base : expected_ms) {
    auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(rc.next_attempt() - t);
    EXPECT_GE(gap.count(), base * 8 / 10) << "base " << base;
    EXPECT_LE(gap.count(), base + took.count() + 1) << "base " << base;  // + the attempt itself
    t = rc.next_attempt();
    took = attempt(t);
  }
  EXPECT_EQ(rc.attempts(), 10u);
}

TEST(ReconnectTest, EnsureNeverBlocksLongerThanTheConnectTimeout) {
  SilentListener silent;
  Endpoint ep;
  ep.host = "127.0.0.1";
  ep.port = silent.port();
  ReconnectPolicy policy;
  policy.connect_timeout = 200ms;
  policy.io_timeout = 10000ms;
  ReconnectingClient rc(ep, policy);
  auto worst = Clock::duration::zero();
  int attempts_seen = 0;
  auto end = Clock::now() + 1500ms;
  while (Clock::now() < end) {
    auto start = Clock::now();
    EXPECT_FALSE(rc.Ensure(start));
    worst = std::max(worst, Clock::now() - start);
    attempts_seen = static_cast<int>(rc.attempts());
    usleep(5000);
  }
  // Bounded by the connect timeout (200 ms), never the io timeout (10 s); the bound between
  // them leaves seconds of margin for a loaded machine.
  EXPECT_LT(worst, 3000ms);
  EXPECT_EQ(rc.last_error().code(), StatusCode::kTimeout);
  // 1.5 s with 200 ms attempts and 100, 200, 400 ms backoff: a handful, not a busy loop.
  EXPECT_GE(attempts_seen, 2);
  EXPECT_LE(attempts_seen, 5);
}

}  // namespace
}  // namespace ft::redis

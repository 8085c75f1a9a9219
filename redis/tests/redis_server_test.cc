// The test servers' own rules: a cluster node's port must suit redis-server, or a test fails
// at start for a reason that has nothing to do with it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redis/tests/redis_server.h"

namespace ft::redis::testing {
namespace {

// Holds the port while it lives, so the pair's second half is tested with the first taken.
class HeldPort {
 public:
  explicit HeldPort(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    held_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~HeldPort() {
    if (fd_ >= 0) close(fd_);
  }
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

TEST(RedisServerTest, AClusterNodesPortIsOneRedisAcceptsWithAFreeBusPort) {
  // redis-server refuses --port above 55535 with --cluster-enabled (its bus is port + 10000);
  // the kernel's port 0 is above that about one time in five.
  for (int i = 0; i < 50; ++i) {
    const int port = UnusedPortWithClusterBus();
    ASSERT_GT(port, 0);
    EXPECT_LE(port + kClusterBusOffset, 65535);
    EXPECT_LE(port, 55535);
    HeldPort node(port);
    HeldPort bus(port + kClusterBusOffset);
    EXPECT_TRUE(node.held()) << port;
    EXPECT_TRUE(bus.held()) << port + kClusterBusOffset;
  }
}

}  // namespace
}  // namespace ft::redis::testing

#include "redis/loopback_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ft::redis {
namespace {

// Binds a fresh socket to 127.0.0.1:`port` (0: the kernel picks) and returns the port it got, or
// 0 when the bind failed; the socket is closed again, so the port is free for a moment only.
int BindLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int got = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    got = ntohs(addr.sin_port);
  }
  close(fd);
  return got;
}

}  // namespace

int FreeLoopbackPort() { return BindLoopback(0); }

bool LoopbackPortIsFree(int port) { return port > 0 && BindLoopback(port) == port; }

}  // namespace ft::redis

#include "bench/pull_bench/socket_copy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace ft::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

bool MakeAddress(const std::string& address, uint16_t port, sockaddr_in* out, std::string* why) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &out->sin_addr) != 1) {
    *why = "not an IPv4 address: " + address;
    return false;
  }
  return true;
}

void NoDelay(int fd) {
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool ReadAll(int fd, uint8_t* p, uint64_t n) {
  while (n > 0) {
    const ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<uint64_t>(got);
  }
  return true;
}

bool WriteAll(int fd, const uint8_t* p, uint64_t n) {
  while (n > 0) {
    // One call per GiB at most: the kernel copies what the socket buffer takes and blocks for
    // the rest; a larger request only returns short.
    const ssize_t put = write(fd, p, std::min<uint64_t>(n, 1ull << 30));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<uint64_t>(put);
  }
  return true;
}

}  // namespace

bool SocketSender::Start(const std::string& address, std::string* why) {
  sockaddr_in addr;
  if (!MakeAddress(address, 0, &addr, why)) return false;
  listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) {
    *why = Errno("socket");
    return false;
  }
  socklen_t len = sizeof(addr);
  if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener_, 4) != 0 ||
      getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *why = Errno("listen on " + address);
    return false;
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
  return true;
}

void SocketSender::Stop() {
  if (listener_ >= 0) shutdown(listener_, SHUT_RDWR);  // wakes accept()
  if (thread_.joinable()) thread_.join();
  if (listener_ >= 0) close(listener_);
  listener_ = -1;
}

void SocketSender::Serve() {
  for (;;) {
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // the listener was shut down
    }
    NoDelay(fd);
    uint8_t request[8];
    if (ReadAll(fd, request, sizeof(request))) {
      uint64_t want = 0;
      for (int i = 7; i >= 0; --i) want = want << 8 | request[i];
      (void)WriteAll(fd, data_, std::min(want, size_));
    }
    close(fd);
  }
}

bool ReceiveCopy(const std::string& address, uint16_t port, uint8_t* dest, uint64_t bytes, SocketCopyResult* out,
                 std::string* why) {
  sockaddr_in addr;
  if (!MakeAddress(address, port, &addr, why)) return false;
  const auto t0 = Clock::now();
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = Errno("socket");
    return false;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *why = Errno("connect to the socket sender");
    close(fd);
    return false;
  }
  NoDelay(fd);
  uint8_t request[8];
  for (int i = 0; i < 8; ++i) request[i] = static_cast<uint8_t>(bytes >> (8 * i));
  const auto sent = Clock::now();
  if (!WriteAll(fd, request, sizeof(request))) {
    *why = Errno("send the request");
    close(fd);
    return false;
  }
  uint64_t done = 0;
  bool first = true;
  while (done < bytes) {
    const ssize_t got = read(fd, dest + done, bytes - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      *why = got == 0 ? "the sender closed after " + std::to_string(done) + " of " + std::to_string(bytes) + " bytes"
                      : Errno("read");
      close(fd);
      return false;
    }
    if (first) {
      out->first_byte_ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
      first = false;
    }
    done += static_cast<uint64_t>(got);
  }
  out->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  close(fd);
  return true;
}

}  // namespace ft::bench

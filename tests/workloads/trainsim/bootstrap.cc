#include "bootstrap.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>

namespace trainsim {

namespace {

constexpr uint32_t kMagic = 0x54534231;  // "TSB1"
constexpr auto kConnectTimeout = std::chrono::seconds(60);
// Rank 0 waits this long for all peers: they may start much later than rank 0 on a cluster.
constexpr int kServeTimeoutMs = 300 * 1000;
constexpr int kIoTimeoutS = 60;

using Clock = std::chrono::steady_clock;

std::string Where(const std::string& addr, int port) { return addr + ":" + std::to_string(port); }

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void SetIoTimeout(int fd) {
  timeval tv{};
  tv.tv_sec = kIoTimeoutS;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

bool Resolve(const std::string& addr, int port, AddrInfo* out, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(addr.c_str(), service.c_str(), &hints, &out->list);
  if (rc != 0) {
    *error = "cannot resolve MASTER_ADDR " + Where(addr, port) + ": " + gai_strerror(rc);
    return false;
  }
  return true;
}

bool Serve(const std::string& addr, int port, int world, const void* blob, uint32_t len,
           std::string* error) {
  AddrInfo ai;
  if (!Resolve(addr, port, &ai, error)) return false;
  Fd listener;
  std::string last = "no address";
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    Fd s(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (s.get() < 0) continue;
    const int one = 1;
    setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s.get(), a->ai_addr, a->ai_addrlen) != 0) {
      last = std::string("bind: ") + std::strerror(errno);
      if (errno == EADDRINUSE) {
        last += " (under torchrun its agent listens on MASTER_PORT: pass --bootstrap-port)";
      }
      continue;
    }
    if (listen(s.get(), world) != 0) {
      last = std::string("listen: ") + std::strerror(errno);
      continue;
    }
    listener.Reset(s.Release());
    break;
  }
  if (listener.get() < 0) {
    *error = "rank 0 cannot listen on " + Where(addr, port) + ": " + last;
    return false;
  }
  std::set<uint32_t> served;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kServeTimeoutMs);
  while (static_cast<int>(served.size()) < world - 1) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      *error = "rank 0 timed out on " + Where(addr, port) + ": " + std::to_string(served.size()) +
               " of " + std::to_string(world - 1) + " peers connected; check that every rank started";
      return false;
    }
    pollfd p{listener.get(), POLLIN, 0};
    const int pr = poll(&p, 1, static_cast<int>(left));
    if (pr < 0 && errno != EINTR) {
      *error = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (pr <= 0) continue;
    Fd conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.get() < 0) continue;
    SetIoTimeout(conn.get());
    uint32_t hello[2] = {0, 0};  // magic, rank
    if (!ReadAll(conn.get(), hello, sizeof(hello)) || hello[0] != kMagic || hello[1] == 0 ||
        hello[1] >= static_cast<uint32_t>(world)) {
      continue;  // not one of ours: ignore it
    }
    const uint32_t header[2] = {kMagic, len};
    if (!WriteAll(conn.get(), header, sizeof(header)) || !WriteAll(conn.get(), blob, len)) continue;
    served.insert(hello[1]);
  }
  return true;
}

bool Fetch(const std::string& addr, int port, int rank, void* blob, uint32_t len, std::string* error) {
  const auto deadline = Clock::now() + kConnectTimeout;
  std::string last;
  while (Clock::now() < deadline) {
    AddrInfo ai;
    if (!Resolve(addr, port, &ai, &last)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
      Fd s(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (s.get() < 0) continue;
      if (connect(s.get(), a->ai_addr, a->ai_addrlen) != 0) {
        last = std::string("connect: ") + std::strerror(errno);
        continue;
      }
      SetIoTimeout(s.get());
      const uint32_t hello[2] = {kMagic, static_cast<uint32_t>(rank)};
      uint32_t header[2] = {0, 0};
      if (!WriteAll(s.get(), hello, sizeof(hello)) || !ReadAll(s.get(), header, sizeof(header))) {
        last = "connection closed during the exchange";
        continue;
      }
      if (header[0] != kMagic || header[1] != len) {
        *error = "unexpected reply from " + Where(addr, port) + " (another program on that port?)";
        return false;
      }
      if (!ReadAll(s.get(), blob, len)) {
        last = "connection closed during the exchange";
        continue;
      }
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  *error = "rank " + std::to_string(rank) + " could not fetch the NCCL id from rank 0 at " +
           Where(addr, port) + " within 60 s (" + last + "); check MASTER_ADDR/MASTER_PORT";
  return false;
}

}  // namespace

bool ExchangeBlob(const std::string& addr, int port, int rank, int world, void* blob, size_t len,
                  std::string* error) {
  if (world <= 1) return true;
  if (rank == 0) return Serve(addr, port, world, blob, static_cast<uint32_t>(len), error);
  return Fetch(addr, port, rank, blob, static_cast<uint32_t>(len), error);
}

}  // namespace trainsim

// transfer_peer: a transfer Server in its own process, serving one deterministic region
// (testing::Pattern(seed, bytes)) under a name, for the multi-process tests. It can be told to
// misbehave the way real peers do: die (SIGKILL itself) or freeze (SIGSTOP itself) in the middle
// of serving, trickle (pause before and after every piece), or serve a copy with one flipped
// byte. Prints "PORT <n>" once listening, then
// serves until SIGTERM.
//
//   transfer_peer --secret S --seed N --bytes B [--name arena/1/0] [--listen 127.0.0.1]
//                 [--kill-at-check K] [--stop-at-check K] [--pause-per-check-ms M]
//                 [--corrupt-offset X]
//
// A "check" is one Region::StillValid() call: the server makes one before and one after each
// piece it sends, so K = 2n-1 lands inside the n-th piece.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "transfer_engine/tests/test_regions.h"
#include "transfer_engine/transfer.h"

namespace {

class MisbehavingRegion : public ft::rdma::Region {
 public:
  MisbehavingRegion(std::vector<uint8_t> bytes, std::string meta, long kill_at, long stop_at, long pause_ms)
      : bytes_(std::move(bytes)), meta_(std::move(meta)), kill_at_(kill_at), stop_at_(stop_at), pause_ms_(pause_ms) {}
  const uint8_t* data() const override { return bytes_.data(); }
  uint64_t size() const override { return bytes_.size(); }
  std::string_view meta() const override { return meta_; }
  bool StillValid() const override {
    long check = ++checks_;
    if (check == kill_at_) raise(SIGKILL);
    if (check == stop_at_) raise(SIGSTOP);
    // On the server's I/O thread: every piece waits, the peer trickles but is never silent long.
    if (pause_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms_));
    return true;
  }

 private:
  std::vector<uint8_t> bytes_;
  std::string meta_;
  long kill_at_, stop_at_, pause_ms_;
  mutable std::atomic<long> checks_{0};
};

class OneRegion : public ft::rdma::RegionProvider {
 public:
  OneRegion(std::string name, std::shared_ptr<const ft::rdma::Region> region)
      : name_(std::move(name)), region_(std::move(region)) {}
  ft::Status Open(std::string_view name, std::shared_ptr<const ft::rdma::Region>* out) override {
    if (name != name_) return ft::Status::NotFound(std::string(name) + ": not on this peer");
    *out = region_;
    return ft::Status::Ok();
  }

 private:
  std::string name_;
  std::shared_ptr<const ft::rdma::Region> region_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string secret, name = "arena/1/0", listen = "127.0.0.1";
  uint64_t seed = 1, bytes = 1 << 20;
  long kill_at = -1, stop_at = -1, pause_ms = 0;
  long long corrupt = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--secret") secret = value;
    else if (flag == "--seed") seed = std::strtoull(value, nullptr, 10);
    else if (flag == "--bytes") bytes = std::strtoull(value, nullptr, 10);
    else if (flag == "--name") name = value;
    else if (flag == "--listen") listen = value;
    else if (flag == "--kill-at-check") kill_at = std::strtol(value, nullptr, 10);
    else if (flag == "--stop-at-check") stop_at = std::strtol(value, nullptr, 10);
    else if (flag == "--pause-per-check-ms") pause_ms = std::strtol(value, nullptr, 10);
    else if (flag == "--corrupt-offset") corrupt = std::strtoll(value, nullptr, 10);
    else {
      std::fprintf(stderr, "transfer_peer: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::vector<uint8_t> data = ft::rdma::testing::Pattern(seed, bytes);
  if (corrupt >= 0 && static_cast<uint64_t>(corrupt) < bytes) data[corrupt] ^= 0x5a;
  auto region = std::make_shared<MisbehavingRegion>(std::move(data), "seed=" + std::to_string(seed),
                                                    kill_at, stop_at, pause_ms);
  OneRegion provider(name, region);

  // SIGTERM is taken with sigwait, so block it before the server's threads inherit the mask.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);

  ft::rdma::ServerOptions options;
  options.listen_address = listen;
  options.secret = secret;
  options.provider = &provider;
  ft::rdma::Server server(options);
  ft::Status s = server.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "transfer_peer: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("PORT %u\n", server.port());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&term, &signal);
  server.Stop();
  return 0;
}

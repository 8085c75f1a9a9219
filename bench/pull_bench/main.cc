// pull_bench (make bench-pull): how fast a replacement node pulls a checkpoint copy from a peer's
// memory with the transfer engine (transfer_engine/transfer.h) over TCP on loopback, against the
// best a plain single-stream socket does with the same bytes, in the same run.
//
// One server process (server.h) holds the copy (2 GiB, a pattern, a real manifest with an XXH3
// checksum per 4 MiB chunk) and serves it through rdma::Server and a plain socket sender. This
// process, the client, repeats runs; each run does, in an order that rotates from run to run,
// each into the same preallocated destination (zeroed, untimed, before each):
//   socket   the plain copy (socket_copy.h): connect, ask, read 2 GiB; no verification
//   engine1  rdma::Stat (the manifest) + rdma::Pull with 1 connection, every chunk verified
//            against the manifest as it lands (counted in the engine's time)
//   engine4  the same with 4 connections, then the restore's last step: the whole copy to
//            device memory through the CUDA runtime (device_copy.h); restore_s = Stat + Pull +
//            verify + host-to-device
//   engine4e engine4 with the data bytes encrypted too (PullOptions::encrypt_data: AES-256-GCM,
//            the server encrypting each piece into a buffer, the client decrypting in place);
//            every run's engine pulls seal their control frames and data headers (protocol 2),
//            so `ratio` already carries that cost and `encrypt_cost` is what encrypting the
//            bytes adds on top
// It also prints each kind's CPU seconds per GiB on both sides (cpu_time.h), which say where the
// time goes when wall seconds are blurred by other work on the machine,
// and checks, untimed, that every destination holds the right bytes (the socket copy against
// the manifest, the device buffer's first and last chunk read back).
//
// Ends with
//   RESULT pull ratio=<socket s / engine4 s> ratio_1conn=<socket s / engine1 s>
//        engine_gbps=<engine4> engine_1conn_gbps=<engine1> socket_gbps=<socket>
//        first_byte_ms=<engine4> restore_s=<engine4 + host-to-device>
//        ratio_encrypted=<socket s / engine4e s> encrypt_cost=<engine4e s / engine4 s - 1>
//        bytes=<N> runs=<R>
// medians over the runs; the ratios are medians of each run's own ratio (its socket copy against
// its engine pulls, taken back to back, so load that comes and goes moves both sides of a ratio);
// gbps are gigabits (1e9 bits) per second, as network links are rated.
//
// usage: pull_bench [--bytes N] [--runs R] [--connections C] [--piece-bytes P] [--in-flight K]
//                   [--server-io-threads T] [--address A] [--verify 0 (diagnostic)]
//        pull_bench serve ...   (the server process; started by the above)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/pull_bench/cpu_time.h"
#include "bench/pull_bench/device_copy.h"
#include "bench/pull_bench/memory.h"
#include "bench/pull_bench/server.h"
#include "bench/pull_bench/server_process.h"
#include "bench/pull_bench/socket_copy.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "transfer_engine/transfer.h"

namespace ft::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Gbps(uint64_t bytes, double seconds) { return static_cast<double>(bytes) * 8 / seconds / 1e9; }

int Fail(const std::string& why) {
  std::printf("bench-pull: FAIL: %s\n", why.c_str());
  std::fflush(stdout);
  return 1;
}

struct Options {
  uint64_t bytes = 2ull << 30;
  int runs = 5;
  int connections = 4;  // the "engine4" figure's connection count
  uint64_t piece_bytes = rdma::kDefaultPieceBytes;
  int in_flight = rdma::PullOptions{}.pieces_in_flight;
  int server_io_threads = rdma::ServerOptions{}.io_threads;
  std::string address = "127.0.0.1";
  bool verify = true;  // --verify 0: a diagnostic (what verification costs); never the figure
};

bool ParseFlags(int argc, char** argv, int first, Options* o, std::string* why) {
  for (int i = first; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      *why = "the flags";
      return false;
    }
    if (i + 1 >= argc) {
      *why = flag + " wants a value";
      return false;
    }
    const char* v = argv[i + 1];
    if (flag == "--bytes") o->bytes = std::strtoull(v, nullptr, 10);
    else if (flag == "--runs") o->runs = std::atoi(v);
    else if (flag == "--connections") o->connections = std::atoi(v);
    else if (flag == "--piece-bytes") o->piece_bytes = std::strtoull(v, nullptr, 10);
    else if (flag == "--in-flight") o->in_flight = std::atoi(v);
    else if (flag == "--server-io-threads") o->server_io_threads = std::atoi(v);
    else if (flag == "--address") o->address = v;
    else if (flag == "--verify") o->verify = std::strcmp(v, "0") != 0;
    else {
      *why = "unknown flag " + flag;
      return false;
    }
  }
  if (o->bytes == 0 || o->bytes % 4096 != 0 || o->runs < 1 || o->connections < 1 || o->piece_bytes == 0 ||
      o->in_flight < 1 || o->server_io_threads < 1) {
    *why = "--bytes must be a positive multiple of 4096; --runs, --connections, --piece-bytes, --in-flight and "
           "--server-io-threads positive";
    return false;
  }
  return true;
}

// The kernel's TCP congestion control: it paces (bbr) or bursts (cubic) the sender, which
// changes how often a sender wakes up per byte, so the figures depend on it.
std::string CongestionControl() {
  std::FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
  char name[64] = {};
  if (f == nullptr) return "unknown";
  const bool got = std::fgets(name, sizeof(name), f) != nullptr;
  std::fclose(f);
  std::string s = got ? name : "unknown";
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The 1-minute load average: on a machine shared with builds, the figures are the contention's
// as much as the code's, and the reader should see how much there was.
std::string LoadAverage() {
  double one = 0;
  if (getloadavg(&one, 1) != 1) return "unknown";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", one);
  return text;
}

std::string RandomSecret() {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < 32; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", rd() & 0xff);
    s += hex;
  }
  return s;
}

// The first chunk whose bytes do not match the manifest, or -1.
int64_t FirstBadChunk(const ckpt::Manifest& m, const uint8_t* data) {
  for (size_t i = 0; i < m.chunk_count(); ++i) {
    if (!ckpt::ChunkVerifies(m, i, data)) return static_cast<int64_t>(i);
  }
  return -1;
}

// The plain copy, and how long one thread then takes to checksum it all (untimed in the copy's
// figure; it says what verification costs the engine on this machine).
struct SocketRun : SocketCopyResult {
  double checksum_s = 0;
  double client_cpu_s = 0, server_cpu_s = 0;
};

struct EngineRun {
  double seconds = 0;        // Stat + Pull (verification included)
  double first_byte_ms = 0;  // PullResult::first_byte_ms
  double first_chunk_ms = 0; // Pull called -> first chunk verified
  double restore_s = 0;      // seconds + host-to-device (when asked)
  double h2d_s = 0;
  double client_cpu_s = 0, server_cpu_s = 0;  // Stat + Pull
};

class Client {
 public:
  Client(const Options& o, const std::string& secret, const ServerProcess& server, Buffer* dest, DeviceCopy* device)
      : o_(o), secret_(secret), server_(server), dest_(dest), device_(device) {}

  bool Socket(SocketRun* out, std::string* why) {
    std::memset(dest_->data(), 0, dest_->size());
    const CpuMeter cpu(server_.pid());
    if (!ReceiveCopy(o_.address, server_.socket_port(), dest_->data(), o_.bytes, out, why)) return false;
    out->client_cpu_s = cpu.client_s();
    out->server_cpu_s = cpu.server_s();
    if (manifest_.chunk_count() > 0) {
      const auto t0 = Clock::now();
      const int64_t bad = FirstBadChunk(manifest_, dest_->data());
      out->checksum_s = Since(t0);
      if (bad >= 0) {
        *why = "the socket copy's chunk " + std::to_string(bad) + " does not match the manifest";
        return false;
      }
    }
    return true;
  }

  bool Engine(int connections, bool restore, EngineRun* out, std::string* why, bool encrypt = false) {
    std::memset(dest_->data(), 0, dest_->size());
    rdma::PullOptions po;
    po.secret = secret_;
    po.encrypt_data = encrypt;
    po.connections = connections;
    po.piece_bytes = o_.piece_bytes;
    po.pieces_in_flight = o_.in_flight;
    const rdma::Peer peer{"server", o_.address, server_.engine_port()};

    const CpuMeter cpu(server_.pid());
    const auto t0 = Clock::now();
    rdma::RegionInfo info;
    Status s = rdma::Stat(po, peer, server_.region(), &info);
    if (!s.ok()) return Err("rdma::Stat: " + s.ToString(), why);
    ckpt::Manifest m;
    s = ckpt::ParseManifest({reinterpret_cast<const uint8_t*>(info.meta.data()), info.meta.size()}, &m);
    if (!s.ok()) return Err("the region's manifest: " + s.ToString(), why);
    if (info.size != o_.bytes || m.data_bytes != o_.bytes) return Err("the region is not --bytes long", why);

    rdma::PullRequest req;
    req.sources.push_back({peer, server_.region()});
    req.dest = dest_->data();
    req.bytes = info.size;
    req.chunk_bytes = m.chunk_bytes;
    std::atomic<int64_t> first_chunk_ns{-1};
    const auto pull_start = Clock::now();
    if (o_.verify) req.verify = [&](uint64_t index, const uint8_t* data, uint64_t len) {
      int64_t none = -1;
      first_chunk_ns.compare_exchange_strong(
          none, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - pull_start).count());
      return index < m.chunk_count() && len == m.chunk_end(index) - m.chunk_begin(index) &&
             ckpt::Checksum(data, len) == m.chunk_checksums[index];
    };
    rdma::PullResult result;
    s = rdma::Pull(po, req, &result);
    out->seconds = Since(t0);
    out->client_cpu_s = cpu.client_s();
    out->server_cpu_s = cpu.server_s();
    if (!s.ok()) {
      std::string notes;
      for (const std::string& n : result.notes) notes += "\n  " + n;
      return Err("rdma::Pull: " + s.ToString() + notes, why);
    }
    if (result.bytes != o_.bytes || result.refetched_chunks != 0 || result.fallback_chunks != 0) {
      return Err("the pull moved " + std::to_string(result.bytes) + " bytes, refetched " +
                     std::to_string(result.refetched_chunks) + " chunks, fell back for " +
                     std::to_string(result.fallback_chunks) + ": not a clean pull",
                 why);
    }
    if (!o_.verify) {  // the diagnostic still checks what landed, untimed
      const int64_t bad = FirstBadChunk(m, dest_->data());
      if (bad >= 0) return Err("the pull's chunk " + std::to_string(bad) + " does not match the manifest", why);
    }
    out->first_byte_ms = result.first_byte_ms;
    out->first_chunk_ms = static_cast<double>(first_chunk_ns.load()) / 1e6;
    if (manifest_.chunk_count() == 0) manifest_ = m;
    if (!restore) return true;

    const auto h0 = Clock::now();
    if (!device_->CopyToDevice(why)) return false;
    out->h2d_s = Since(h0);
    out->restore_s = Since(t0);
    // What landed on the device: its first and last chunk against the manifest.
    for (size_t i : {size_t{0}, m.chunk_count() - 1}) {
      std::vector<uint8_t> back(m.chunk_end(i) - m.chunk_begin(i));
      if (!device_->ReadBack(m.chunk_begin(i), back.size(), back.data(), why)) return false;
      if (ckpt::Checksum(back.data(), back.size()) != m.chunk_checksums[i]) {
        return Err("device chunk " + std::to_string(i) + " does not match the manifest after the restore", why);
      }
    }
    return true;
  }

 private:
  static bool Err(const std::string& what, std::string* why) {
    *why = what;
    return false;
  }

  const Options& o_;
  const std::string& secret_;
  const ServerProcess& server_;
  Buffer* dest_;
  DeviceCopy* device_;
  ckpt::Manifest manifest_;  // from the first engine pull; checks the socket copies
};

int Measure(const Options& o) {
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return Fail("cannot find this executable");
  const std::string secret = RandomSecret();
  ServerProcess server;
  std::string why;
  const auto t0 = Clock::now();
  if (!server.Start(self, {"--bytes", std::to_string(o.bytes), "--io-threads", std::to_string(o.server_io_threads),
                           "--address", o.address},
                    secret, &why)) {
    return Fail(why);
  }
  Buffer dest;
  if (!dest.Allocate(o.bytes, &why)) return Fail(why);
  DeviceCopy device;
  if (!device.Open(dest.data(), dest.size(), &why)) return Fail(why);
  std::printf("bench: %.2f GiB on %s, server process ready in %.1f s (%s), %d runs, engine: %d connections, "
              "%llu-byte pieces, %d in flight per connection, %d server I/O threads, TCP congestion control %s, load "
              "average %s%s\n",
              static_cast<double>(o.bytes) / (1ull << 30), o.address.c_str(), Since(t0), server.ready_line().c_str(),
              o.runs, o.connections, static_cast<unsigned long long>(o.piece_bytes), o.in_flight, o.server_io_threads,
              CongestionControl().c_str(), LoadAverage().c_str(), o.verify ? "" : "; DIAGNOSTIC: chunks not verified (--verify 0), the figures are not the engine's");
  std::fflush(stdout);

  Client client(o, secret, server, &dest, &device);
  // One untimed round first: it fetches the manifest the socket copies are checked against,
  // and fails early on a broken setup.
  SocketRun sock;
  EngineRun eng;
  if (!client.Engine(o.connections, true, &eng, &why) || !client.Socket(&sock, &why)) return Fail(why);

  std::vector<double> socket_s, socket_fb, checksum_s, engine1_s, engine4_s, first_byte, first_chunk, restore_s, h2d_s,
      pair_ratio, pair_ratio_1conn;
  // CPU seconds per GiB moved, client + server, per transfer kind.
  std::vector<double> socket_cpu_c, socket_cpu_s, e1_cpu_c, e1_cpu_s, e4_cpu_c, e4_cpu_s, e4e_cpu_c, e4e_cpu_s;
  std::vector<double> engine4e_s, pair_ratio_encrypted, encrypt_cost;
  const double gib = static_cast<double>(o.bytes) / (1ull << 30);
  for (int run = 0; run < o.runs; ++run) {
    SocketRun sr;
    EngineRun e1, e4, e4e;
    for (int k = 0; k < 4; ++k) {
      const int which = (run + k) % 4;  // the order rotates: no side is always first or last
      const bool ok = which == 0   ? client.Socket(&sr, &why)
                      : which == 1 ? client.Engine(1, false, &e1, &why)
                      : which == 2 ? client.Engine(o.connections, true, &e4, &why)
                                   : client.Engine(o.connections, false, &e4e, &why, /*encrypt=*/true);
      if (!ok) return Fail(why);
    }
    engine4e_s.push_back(e4e.seconds);
    pair_ratio_encrypted.push_back(sr.seconds / e4e.seconds);
    encrypt_cost.push_back(e4e.seconds / e4.seconds - 1);
    e4e_cpu_c.push_back(e4e.client_cpu_s / gib);
    e4e_cpu_s.push_back(e4e.server_cpu_s / gib);
    socket_s.push_back(sr.seconds);
    socket_fb.push_back(sr.first_byte_ms);
    checksum_s.push_back(sr.checksum_s);
    engine1_s.push_back(e1.seconds);
    engine4_s.push_back(e4.seconds);
    first_byte.push_back(e4.first_byte_ms);
    first_chunk.push_back(e4.first_chunk_ms);
    restore_s.push_back(e4.restore_s);
    h2d_s.push_back(e4.h2d_s);
    pair_ratio.push_back(sr.seconds / e4.seconds);
    pair_ratio_1conn.push_back(sr.seconds / e1.seconds);
    socket_cpu_c.push_back(sr.client_cpu_s / gib);
    socket_cpu_s.push_back(sr.server_cpu_s / gib);
    e1_cpu_c.push_back(e1.client_cpu_s / gib);
    e1_cpu_s.push_back(e1.server_cpu_s / gib);
    e4_cpu_c.push_back(e4.client_cpu_s / gib);
    e4_cpu_s.push_back(e4.server_cpu_s / gib);
    std::printf("run %d: socket %.3f s (%.2f Gb/s), engine 1 conn %.3f s (%.2f Gb/s), engine %d conn %.3f s "
                "(%.2f Gb/s, first byte %.2f ms, first chunk verified %.2f ms), restore %.3f s (host-to-device %.3f s), "
                "encrypted %.3f s (%.2f Gb/s)\n",
                run + 1, sr.seconds, Gbps(o.bytes, sr.seconds), e1.seconds, Gbps(o.bytes, e1.seconds), o.connections,
                e4.seconds, Gbps(o.bytes, e4.seconds), e4.first_byte_ms, e4.first_chunk_ms, e4.restore_s, e4.h2d_s,
                e4e.seconds, Gbps(o.bytes, e4e.seconds));
    std::fflush(stdout);
  }
  if (!server.Stop()) return Fail("the server process did not exit cleanly");
  std::printf("bench: load average %s at the end\n", LoadAverage().c_str());

  const double sock_med = Median(socket_s), e1_med = Median(engine1_s), e4_med = Median(engine4_s);
  std::printf("bench: medians: socket %.3f s, engine 1 conn %.3f s, engine %d conn %.3f s (ratios of the medians: "
              "%.3f with %d connections, %.3f with 1); per-run ratios (socket / engine) %d conn %.3f..%.3f, 1 conn "
              "%.3f..%.3f; socket first byte %.2f ms; engine first chunk verified %.2f ms; host-to-device %.3f s; XXH3 "
              "of the whole copy on one thread %.3f s\n",
              sock_med, e1_med, o.connections, e4_med, sock_med / e4_med, o.connections, sock_med / e1_med,
              o.connections, *std::min_element(pair_ratio.begin(), pair_ratio.end()),
              *std::max_element(pair_ratio.begin(), pair_ratio.end()),
              *std::min_element(pair_ratio_1conn.begin(), pair_ratio_1conn.end()),
              *std::max_element(pair_ratio_1conn.begin(), pair_ratio_1conn.end()), Median(socket_fb),
              Median(first_chunk), Median(h2d_s), Median(checksum_s));
  std::printf("bench: CPU seconds per GiB (client + server, medians): socket %.3f + %.3f, engine 1 conn %.3f + %.3f, "
              "engine %d conn %.3f + %.3f, encrypted %.3f + %.3f\n",
              Median(socket_cpu_c), Median(socket_cpu_s), Median(e1_cpu_c), Median(e1_cpu_s), o.connections,
              Median(e4_cpu_c), Median(e4_cpu_s), Median(e4e_cpu_c), Median(e4e_cpu_s));
  std::printf("RESULT pull ratio=%.3f ratio_1conn=%.3f engine_gbps=%.2f engine_1conn_gbps=%.2f socket_gbps=%.2f "
              "first_byte_ms=%.2f restore_s=%.3f ratio_encrypted=%.3f encrypt_cost=%.3f engine_encrypted_gbps=%.2f "
              "bytes=%llu runs=%d%s\n",
              Median(pair_ratio), Median(pair_ratio_1conn), Gbps(o.bytes, e4_med), Gbps(o.bytes, e1_med),
              Gbps(o.bytes, sock_med), Median(first_byte), Median(restore_s), Median(pair_ratio_encrypted),
              Median(encrypt_cost), Gbps(o.bytes, Median(engine4e_s)), static_cast<unsigned long long>(o.bytes),
              o.runs, o.verify ? "" : " verified=0");
  return 0;
}

int Serve(int argc, char** argv) {
  ServeOptions so;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--bytes") so.bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--io-threads") so.io_threads = std::atoi(argv[i + 1]);
    else if (flag == "--address") so.address = argv[i + 1];
    else return Fail("serve: unknown flag " + flag);
  }
  return RunServer(so);
}

}  // namespace
}  // namespace ft::bench

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) return ft::bench::Serve(argc, argv);
  ft::bench::Options o;
  std::string why;
  if (!ft::bench::ParseFlags(argc, argv, 1, &o, &why)) {
    std::fprintf(stderr, "pull_bench: %s\nusage: pull_bench [--bytes N] [--runs R] [--connections C] "
                 "[--piece-bytes P] [--in-flight K] [--server-io-threads T] [--address A] [--verify 0]\n", why.c_str());
    return 2;
  }
  return ft::bench::Measure(o);
}

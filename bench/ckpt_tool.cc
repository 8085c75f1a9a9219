// ckpt_bench_tool: the measuring side of `make bench-ckpt` (ckpt_bench.py runs it), doing what
// ftworker does with the real library calls, timed:
//
//   save    --job J --ranks R:PID[,R:PID...] --runs N
//           a just-in-time save posted the way ftworker posts it (shm::PostCommand kSave on
//           each rank's segment), polled to its ack; all ranks at once; one line per run with
//           the wall seconds from the first post to the last ack, and each ack's message.
//   memcpy  --bytes N --threads T --runs K
//           the baseline: T threads each memcpy N bytes (through a pre-faulted source and
//           destination of up to 256 MiB, reused: the same bytes at memory bandwidth, without
//           holding 2N of memory); wall seconds per run.
//   memcpy  --arena-dir D --job J --rank R
//           the floor of a restore in a new process: the rank's committed copy mapped fresh in
//           this process and memcpy'd into a pre-faulted buffer; seconds from the open.
//   verify-copy --arena-dir D --job J --rank R
//           the floor of a verified restore without ft: the committed copy mapped fresh, each
//           chunk checked against its checksum on this thread and, once checked, copied by a
//           second thread into a pre-faulted buffer of the copy's size in chunk-sized pieces
//           (what ft_restore does on gpusim, where the copy engine is a CPU thread); seconds
//           from the open to the last byte.
//   wait    --arena-dir D --job J --ranks R[,R...] --step S [--timeout-s T]
//           until every rank's arena holds a committed copy of step S (periodic saves commit
//           in the background).
//   persist --arena-dir D --job J --rank R --dir DIR --tier local|remote
//           the rank's committed copy written to a tier (ckpt::PersistCopy, as ftworker's
//           persist thread does); seconds, bytes and whether O_DIRECT was used.
//
// Exit 0 on success, 1 on a failure (printed), 2 on bad arguments.
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "jitckpt/arena.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tier.h"
#include "shm/mailbox.h"
#include "shm/segment.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "ckpt_bench_tool: %s\n", why.c_str());
  return 1;
}

int Save(std::map<std::string, std::string>& a) {
  struct Target {
    int rank;
    std::unique_ptr<ft::shm::Segment> segment;
    uint64_t seq = 0;
    bool acked = false;
  };
  std::vector<Target> targets;
  for (const std::string& rp : Split(a["--ranks"], ',')) {
    const auto parts = Split(rp, ':');
    if (parts.size() != 2) return Fail("--ranks wants R:PID, got " + rp);
    Target t;
    t.rank = std::atoi(parts[0].c_str());
    const std::string name = ft::shm::SegmentName(a["--job"], t.rank, std::atoi(parts[1].c_str()));
    ft::Status s = ft::shm::Segment::Attach(name, &t.segment);
    if (!s.ok()) return Fail("attach " + name + ": " + s.ToString());
    targets.push_back(std::move(t));
  }
  const int runs = std::atoi(a["--runs"].c_str());
  for (int run = 0; run < runs; ++run) {
    const std::string id = "bench-save-" + std::to_string(run);
    const auto payload = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(id.data()), id.size());
    const auto t0 = Clock::now();
    for (Target& t : targets) {
      t.acked = false;
      ft::Status s = ft::shm::PostCommand(*t.segment, static_cast<uint32_t>(ft::shm::CommandType::kSave), payload, &t.seq);
      if (!s.ok()) return Fail("post to rank " + std::to_string(t.rank) + ": " + s.ToString());
    }
    std::vector<std::string> messages(targets.size());
    for (size_t done = 0; done < targets.size();) {
      for (size_t i = 0; i < targets.size(); ++i) {
        if (targets[i].acked) continue;
        auto ack = ft::shm::PollAck(*targets[i].segment, targets[i].seq);
        if (!ack) continue;
        if (ack->result != 0) return Fail("rank " + std::to_string(targets[i].rank) + " save failed: " + ack->message);
        targets[i].acked = true;
        messages[i] = ack->message;
        ++done;
      }
      if (Since(t0) > 300) return Fail("no ack within 300 s");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::printf("save_s=%.4f", Since(t0));
    for (size_t i = 0; i < targets.size(); ++i) std::printf(" [rank %d: %s]", targets[i].rank, messages[i].c_str());
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

int Memcpy(std::map<std::string, std::string>& a) {
  const uint64_t bytes = std::strtoull(a["--bytes"].c_str(), nullptr, 10);
  const int threads = std::max(1, std::atoi(a["--threads"].c_str()));
  const int runs = std::atoi(a["--runs"].c_str());
  const uint64_t piece = std::min<uint64_t>(bytes, 256ull << 20);
  std::vector<std::vector<char>> src(threads, std::vector<char>(piece, 1)), dst(threads, std::vector<char>(piece, 2));
  // One untimed pass first: the timed ones then see mapped, cached-in-TLB buffers, as the
  // save's copy sees the arena it wrote before.
  for (int t = 0; t < threads; ++t) std::memcpy(dst[t].data(), src[t].data(), piece);
  for (int run = 0; run < runs; ++run) {
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (uint64_t done = 0; done < bytes; done += piece) {
          std::memcpy(dst[t].data(), src[t].data(), std::min(piece, bytes - done));
        }
      });
    }
    for (auto& th : pool) th.join();
    std::printf("memcpy_s=%.4f\n", Since(t0));
    std::fflush(stdout);
  }
  return dst[0][piece - 1] == 1 ? 0 : Fail("memcpy did not copy");
}

// The floor of any restore in a new process: the committed copy of an arena, mapped fresh here,
// memcpy'd into a pre-faulted buffer. Timed from the open to the last byte, so it pays what the
// restoring process pays to map another process's pages (on a VM with shadow paging, ~1.4 s per
// GiB at first touch, which no populate call in advance avoids).
int MemcpyFromArena(std::map<std::string, std::string>& a) {
  const std::string path = ft::ckpt::Arena::PathFor(a["--arena-dir"], a["--job"], std::atoi(a["--rank"].c_str()));
  const uint64_t piece = 256ull << 20;
  std::vector<char> dst(piece, 2);  // pre-faulted: only the source is fresh
  const auto t0 = Clock::now();
  ft::ckpt::Arena arena;
  if (auto s = ft::ckpt::Arena::OpenForRead(path, &arena); !s.ok()) return Fail(s.ToString());
  ft::ckpt::Manifest m;
  uint64_t gen = 0;
  if (auto s = arena.ReadCommitted(&m, &gen); !s.ok()) return Fail(s.ToString());
  const uint8_t* from = arena.data(gen);
  for (uint64_t done = 0; done < m.data_bytes; done += piece) {
    std::memcpy(dst.data(), from + done, std::min(piece, m.data_bytes - done));
  }
  std::printf("memcpy_s=%.4f bytes=%llu\n", Since(t0), static_cast<unsigned long long>(m.data_bytes));
  return 0;
}

int VerifyCopy(std::map<std::string, std::string>& a) {
  const std::string path = ft::ckpt::Arena::PathFor(a["--arena-dir"], a["--job"], std::atoi(a["--rank"].c_str()));
  ft::ckpt::Arena probe;
  if (auto s = ft::ckpt::Arena::OpenForRead(path, &probe); !s.ok()) return Fail(s.ToString());
  ft::ckpt::Manifest sized;
  uint64_t gen = 0;
  if (auto s = probe.ReadCommitted(&sized, &gen); !s.ok()) return Fail(s.ToString());
  // As gpusim's device memory: anonymous, on huge pages where the kernel gives them, faulted in
  // before the clock starts (the restoring app's buffers exist before ft_restore).
  const size_t bytes = sized.data_bytes;
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return Fail("mmap of the destination failed");
  (void)madvise(mapped, bytes, MADV_HUGEPAGE);
  uint8_t* dst = static_cast<uint8_t*>(mapped);
  std::memset(dst, 0, bytes);

  const auto t0 = Clock::now();
  ft::ckpt::Arena arena;
  if (auto s = ft::ckpt::Arena::OpenForRead(path, &arena); !s.ok()) return Fail(s.ToString());
  ft::ckpt::Manifest m;
  if (auto s = arena.ReadCommitted(&m, &gen); !s.ok()) return Fail(s.ToString());
  if (m.data_bytes != bytes) return Fail("the committed copy changed size under the floor");
  const uint8_t* from = arena.data(gen);
  std::atomic<size_t> verified{0};
  std::thread copier([&] {
    for (size_t i = 0; i < m.chunk_count(); ++i) {
      while (verified.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      const uint64_t begin = m.chunk_begin(i);
      std::memmove(dst + begin, from + begin, m.chunk_end(i) - begin);
    }
  });
  bool good = true;
  for (size_t i = 0; i < m.chunk_count(); ++i) {
    good &= ft::ckpt::ChunkVerifies(m, i, from);
    verified.store(i + 1, std::memory_order_release);
  }
  copier.join();
  const double secs = Since(t0);
  munmap(mapped, bytes);
  if (!good) return Fail("a chunk of the committed copy does not match its checksum");
  std::printf("verify_copy_s=%.4f bytes=%llu\n", secs, static_cast<unsigned long long>(bytes));
  return 0;
}

int Wait(std::map<std::string, std::string>& a) {
  const int64_t step = std::strtoll(a["--step"].c_str(), nullptr, 10);
  const double timeout = a.count("--timeout-s") ? std::strtod(a["--timeout-s"].c_str(), nullptr) : 120;
  const auto t0 = Clock::now();
  for (const std::string& r : Split(a["--ranks"], ',')) {
    const std::string path = ft::ckpt::Arena::PathFor(a["--arena-dir"], a["--job"], std::atoi(r.c_str()));
    for (;;) {
      ft::ckpt::Arena arena;
      ft::ckpt::Manifest m;
      uint64_t gen = 0;
      if (ft::ckpt::Arena::OpenForRead(path, &arena).ok() && arena.ReadCommitted(&m, &gen).ok() && m.step == step) break;
      if (Since(t0) > timeout) return Fail(path + " holds no committed step " + std::to_string(step));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::printf("committed step=%lld after %.3f s\n", static_cast<long long>(step), Since(t0));
  return 0;
}

int Persist(std::map<std::string, std::string>& a) {
  const std::string path = ft::ckpt::Arena::PathFor(a["--arena-dir"], a["--job"], std::atoi(a["--rank"].c_str()));
  ft::ckpt::Arena arena;
  ft::Status s = ft::ckpt::Arena::OpenForRead(path, &arena);
  if (!s.ok()) return Fail(path + ": " + s.ToString());
  ft::ckpt::Manifest m;
  uint64_t gen = 0;
  s = arena.ReadCommitted(&m, &gen);
  if (!s.ok()) return Fail(path + ": " + s.ToString());
  const std::string tier = a["--tier"];
  if (tier != "local" && tier != "remote") return Fail("--tier local|remote");
  ft::ckpt::PersistStats stats;
  const auto t0 = Clock::now();
  s = ft::ckpt::PersistCopy(tier == "local" ? ft::ckpt::TierKind::kLocal : ft::ckpt::TierKind::kRemote, a["--dir"], m,
                            arena.data(gen), [&] { return arena.StillCommitted(gen); }, &stats);
  const double secs = Since(t0);
  if (!s.ok()) return Fail("PersistCopy: " + s.ToString());
  // data_offset: where the committed copy's data starts in the arena file (the slots are the
  // file's tail), for the dd baseline that copies the same bytes.
  const uint64_t data_offset = arena.mapped_bytes() - arena.slots_bytes() +
                               static_cast<uint64_t>(arena.data(gen) - arena.slots_data());
  std::printf("persist_s=%.4f bytes=%llu direct_io=%d step=%lld data_offset=%llu\n", secs,
              static_cast<unsigned long long>(stats.bytes), stats.direct_io ? 1 : 0, static_cast<long long>(m.step),
              static_cast<unsigned long long>(data_offset));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string cmd = argv[1];
  std::map<std::string, std::string> a;
  for (int i = 2; i + 1 < argc; i += 2) a[argv[i]] = argv[i + 1];
  if (cmd == "save") return Save(a);
  if (cmd == "memcpy" && a.count("--arena-dir")) return MemcpyFromArena(a);
  if (cmd == "memcpy") return Memcpy(a);
  if (cmd == "verify-copy") return VerifyCopy(a);
  if (cmd == "wait") return Wait(a);
  if (cmd == "persist") return Persist(a);
  std::fprintf(stderr, "usage: ckpt_bench_tool save|memcpy|verify-copy|wait|persist ... (see ckpt_tool.cc)\n");
  return 2;
}

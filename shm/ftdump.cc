// ftdump: prints live or leftover ft segments for debugging. Reads only; never consumes ring
// records and never posts commands, so it is safe next to a running ftworker.
//   ftdump                 every ft segment in /dev/shm
//   ftdump --job J         the segments of job J
//   ftdump /ft.J.r3.p42    one segment (name as in /dev/shm, with or without the leading /)
//   --records N            also show the newest N unconsumed records (default 0)
#include <dirent.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "shm/comm_table.h"
#include "shm/hook_failures.h"
#include "shm/ring.h"
#include "shm/segment.h"

namespace {

using ft::shm::Record;
using ft::shm::Segment;

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}


double AgeSeconds(uint64_t now, uint64_t then) {
  return then == 0 || then > now ? 0.0 : static_cast<double>(now - then) / 1e9;
}

void Dump(const Segment& segment, size_t records) {
  const ft::shm::SegmentHeader* h = segment.header();
  uint64_t now = MonotonicNs();
  bool alive = kill(h->pid, 0) == 0 || errno == EPERM;
  std::printf("%s  job=%.64s node=%.64s host=%.64s rank=%d local_rank=%d world=%d pid=%d%s\n",
              segment.name().c_str(), h->job, h->node, h->host, h->global_rank, h->local_rank,
              h->world_size, h->pid, alive ? "" : " (process gone)");
  std::printf("  state=%s heartbeat=%.1fs ago (#%llu) last_call=%.1fs ago calls=%llu\n",
              ft::shm::ProcessStateName(h->state.load()), AgeSeconds(now, h->heartbeat_ns.load()),
              static_cast<unsigned long long>(h->heartbeat_count.load()),
              AgeSeconds(now, h->last_call_ns.load()),
              static_cast<unsigned long long>(h->call_count.load()));
  uint64_t blocked_since = h->blocked_since_ns.load(std::memory_order_acquire);
  if (blocked_since != 0) {
    std::printf("  blocked in a synchronizing call for %.1f s (%llu thread(s))\n",
                AgeSeconds(now, blocked_since),
                static_cast<unsigned long long>(h->blocked_count.load()));
  }
  // Failures libft.so swallowed to keep the app running: monitoring has a hole there.
  for (const ft::shm::HookFailureCount& f : ft::shm::SnapshotHookFailures(h)) {
    const char* name = ft::shm::HookPlaceName(f.place);
    const auto count = static_cast<unsigned long long>(f.count);
    if (name != nullptr) {
      std::printf("  hook failures: %s x%llu\n", name, count);
    } else {
      std::printf("  hook failures: place %u x%llu\n", f.place, count);
    }
  }
  std::printf("  ring: capacity=%u head=%llu tail=%llu dropped=%llu\n", h->ring_capacity,
              static_cast<unsigned long long>(h->ring_head.load()),
              static_cast<unsigned long long>(segment.control()->ring_tail.load()),
              static_cast<unsigned long long>(h->ring_dropped.load()));
  for (uint32_t i = 0; i < segment.comm_slot_count(); ++i) {  // the validated count
    auto p = ft::shm::SnapshotCommSlot(segment, i);
    if (!p) continue;
    bool in_flight = p->entered_seq > p->completed_seq;
    std::printf("  comm %016llx%s rank %d/%d: entered=%llu started=%llu completed=%llu",
                static_cast<unsigned long long>(p->comm_id),
                (p->flags & ft::shm::kCommSlotP2P) ? " (p2p)" : "", p->comm_rank, p->comm_size,
                static_cast<unsigned long long>(p->entered_seq),
                static_cast<unsigned long long>(p->started_seq),
                static_cast<unsigned long long>(p->completed_seq));
    if (in_flight) {
      // How long the oldest pending op has waited, which is what a hang is measured by (the
      // newest entered op may be a moment old while the oldest has waited for minutes).
      std::printf(" IN FLIGHT op=%u bytes=%llu", p->enter_op,
                  static_cast<unsigned long long>(p->entered_bytes));
      unsigned long long oldest = static_cast<unsigned long long>(p->completed_seq + 1);
      if (p->pending_seq == p->completed_seq + 1) {
        std::printf(" for %.2fs (oldest pending: #%llu)", AgeSeconds(now, p->pending_ns), oldest);
      } else if (p->pending_seq > p->completed_seq + 1 && p->pending_seq <= p->entered_seq) {
        std::printf(" for %.2fs or more (oldest pending: #%llu, entered before #%llu)",
                    AgeSeconds(now, p->pending_ns), oldest,
                    static_cast<unsigned long long>(p->pending_seq));
      } else {
        std::printf(" for %.2fs (since the newest entered, #%llu; the oldest pending, #%llu, has no "
                    "known entry time)",
                    AgeSeconds(now, p->entered_ns), static_cast<unsigned long long>(p->entered_seq),
                    oldest);
      }
    }
    std::printf("\n");
  }
  if (records > 0) {
    std::vector<Record> out(records);
    size_t n = ft::shm::RingReader(segment).Peek(out.data(), out.size());
    for (size_t i = 0; i < n; ++i) {
      const Record& r = out[i];
      std::printf("  record type=%u flags=%u comm=%016llx seq=%llu t=%llu a=%llu b=%llu c=%llu d=%llu\n",
                  r.type, r.flags, static_cast<unsigned long long>(r.comm_id),
                  static_cast<unsigned long long>(r.seq), static_cast<unsigned long long>(r.time_ns),
                  static_cast<unsigned long long>(r.a), static_cast<unsigned long long>(r.b),
                  static_cast<unsigned long long>(r.c), static_cast<unsigned long long>(r.d));
    }
  }
}

int Usage(FILE* out) {
  std::fprintf(out, "usage: ftdump [--job J] [--records N] [SEGMENT...]\n");
  return out == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string job;
  size_t records = 0;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return Usage(stdout);
    if ((arg == "--job" || arg == "--records") && i + 1 >= argc) {
      std::fprintf(stderr, "ftdump: %s needs a value\n", arg.c_str());
      return 2;
    }
    if (arg == "--job") {
      job = argv[++i];
    } else if (arg == "--records") {
      char* end = nullptr;
      records = std::strtoull(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || records > 100000) {
        std::fprintf(stderr, "ftdump: --records takes a number up to 100000\n");
        return 2;
      }
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "ftdump: unknown flag '%s'\n", arg.c_str());
      return Usage(stderr);
    } else {
      names.push_back(arg.starts_with("/") ? arg : "/" + arg);
    }
  }
  if (names.empty()) {
    std::string prefix = job.empty() ? "ft." : ft::shm::SegmentPrefix(job).substr(1);
    DIR* dir = opendir("/dev/shm");
    if (dir == nullptr) {
      std::perror("ftdump: /dev/shm");
      return 1;
    }
    while (struct dirent* entry = readdir(dir)) {
      if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) {
        names.push_back(std::string("/") + entry->d_name);
      }
    }
    closedir(dir);
  }
  int failures = 0;
  for (const std::string& name : names) {
    std::unique_ptr<Segment> segment;
    ft::Status status = Segment::Attach(name, &segment);
    if (!status.ok()) {
      std::fprintf(stderr, "ftdump: %s\n", status.ToString().c_str());
      ++failures;
      continue;
    }
    Dump(*segment, records);
  }
  if (names.empty()) std::printf("no ft segments%s%s\n", job.empty() ? "" : " for job ", job.c_str());
  return failures == 0 ? 0 : 1;
}

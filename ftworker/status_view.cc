#include "ftworker/status_view.h"

#include <dirent.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "proto/messages.h"
#include "shm/comm_table.h"
#include "shm/segment.h"

namespace ft::worker {

namespace {

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

double AgeS(uint64_t now, uint64_t then) {
  return then == 0 || then > now ? -1.0 : static_cast<double>(now - then) / 1e9;
}

std::string Age(double seconds) { return seconds < 0 ? "-" : fmt::format("{:.1f}s", seconds); }

// The segment's state (shm::ProcessStateName); a process that is gone without its clean exit
// is dead, whatever its segment last said (proto::RankState's name for it).
const char* StateName(uint32_t state, bool alive) {
  if (!alive && state != static_cast<uint32_t>(shm::ProcessState::kExited)) {
    return proto::RankStateName(proto::RankState::kDead);
  }
  return shm::ProcessStateName(state);
}

}  // namespace

std::string LocalStatus(std::string_view job, const std::string& shm_dir, bool json) {
  std::string prefix = shm::SegmentPrefix(job);
  if (!prefix.empty() && prefix[0] == '/') prefix.erase(0, 1);
  std::vector<std::string> names;
  if (DIR* dir = opendir(shm_dir.c_str())) {
    while (dirent* e = readdir(dir)) {
      std::string name = e->d_name;
      if (name.compare(0, prefix.size(), prefix) == 0) names.push_back("/" + name);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  if (!json) {
    out += fmt::format("{:>5} {:>8} {:>9} {:>9} {:>9} {:>9}  {}\n", "rank", "pid", "state",
                       "heartbeat", "last call", "blocked", "in flight");
  }
  uint64_t now = MonoNs();
  for (const auto& name : names) {
    std::unique_ptr<shm::Segment> segment;
    Status s = shm::Segment::Attach(name, &segment);
    if (!s.ok()) {
      out += json ? fmt::format("{{\"segment\":\"{}\",\"error\":\"unreadable\"}}\n", name)
                  : fmt::format("{}: unreadable ({})\n", name, s.message());
      continue;
    }
    const shm::SegmentHeader* h = segment->header();
    bool alive = kill(h->pid, 0) == 0 || errno == EPERM;
    std::string in_flight;
    for (uint32_t i = 0; i < segment->comm_slot_count(); ++i) {  // the validated count
      auto p = shm::SnapshotCommSlot(*segment, i);
      if (!p || p->entered_seq <= p->completed_seq) continue;
      bool started = p->started_seq > p->completed_seq;
      in_flight += fmt::format("{}comm {:016x} #{} {} {}", in_flight.empty() ? "" : "; ",
                               p->comm_id, p->completed_seq + 1,
                               started ? "waiting on peers" : "not reached by the GPU",
                               Age(AgeS(now, started ? p->started_ns : p->entered_ns)));
    }
    // blocked_since_ns lives at header offset 464 (docs/shm-format.md); 0 = not blocked.
    uint64_t blocked_since = reinterpret_cast<const std::atomic<uint64_t>*>(
        reinterpret_cast<const uint8_t*>(h) + 464)->load(std::memory_order_relaxed);
    if (json) {
      out += fmt::format(
          "{{\"rank\":{},\"pid\":{},\"state\":\"{}\",\"heartbeat_age_s\":{:.3f},"
          "\"last_call_age_s\":{:.3f},\"blocked_s\":{:.3f},\"in_flight\":\"{}\"}}\n",
          h->global_rank, h->pid, StateName(h->state.load(), alive),
          AgeS(now, h->heartbeat_ns.load()), AgeS(now, h->last_call_ns.load()),
          blocked_since ? AgeS(now, blocked_since) : 0.0, in_flight);
    } else {
      out += fmt::format("{:>5} {:>8} {:>9} {:>9} {:>9} {:>9}  {}\n", h->global_rank, h->pid,
                         StateName(h->state.load(), alive), Age(AgeS(now, h->heartbeat_ns.load())),
                         Age(AgeS(now, h->last_call_ns.load())),
                         blocked_since ? Age(AgeS(now, blocked_since)) : "-",
                         in_flight.empty() ? "-" : in_flight);
    }
  }
  if (names.empty() && !json) out += fmt::format("(no segments of job {} in {})\n", job, shm_dir);
  return out;
}

}  // namespace ft::worker

// ft_drain: the test's stand-in for ftworker. Follows every segment of one job in /dev/shm
// (also ones that appear later), consumes their ring records and snapshots their in-flight
// tables, and prints both as lines a test parses:
//   segment rank=R pid=P name=N
//   rec rank=R type=T flags=F slot=S comm=HEX seq=Q t=NS a=A b=B c=C d=D
//   slot rank=R comm=HEX comm_rank=K size=N entered=E started=S completed=C op=O
//   end rank=R state=S dropped=D calls=C heartbeats=H
// A segment is finished when its process marked it exited (or the process is gone); its
// mapping outlives the unlink, so the final records and table are still read.
// Exits 0 once --ranks segments were seen and all finished, 1 on --timeout.
//   ft_drain --job J --ranks N [--timeout S]
#include <dirent.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shm/comm_table.h"
#include "shm/ring.h"
#include "shm/segment.h"

namespace {

using ft::shm::Segment;

struct Followed {
  std::unique_ptr<Segment> segment;
  std::unique_ptr<ft::shm::RingReader> reader;
  int rank = -1;
  bool done = false;
};

double NowS() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

void Drain(Followed& f) {
  ft::shm::Record records[512];
  for (;;) {
    size_t got = 0;
    ft::Status s = f.reader->Poll(records, 512, &got);
    if (!s.ok()) std::fprintf(stderr, "ft_drain: %s\n", s.ToString().c_str());
    for (size_t i = 0; i < got; ++i) {
      const auto& r = records[i];
      std::printf("rec rank=%d type=%u flags=%u slot=%u comm=%016llx seq=%llu t=%llu a=%llu b=%llu c=%llu d=%llu\n",
                  f.rank, r.type, r.flags, r.comm_slot, static_cast<unsigned long long>(r.comm_id),
                  static_cast<unsigned long long>(r.seq), static_cast<unsigned long long>(r.time_ns),
                  static_cast<unsigned long long>(r.a), static_cast<unsigned long long>(r.b),
                  static_cast<unsigned long long>(r.c), static_cast<unsigned long long>(r.d));
    }
    if (got < 512) return;
  }
}

void Finish(Followed& f) {
  Drain(f);
  const auto* h = f.segment->header();
  for (uint32_t i = 0; i < h->comm_slot_count; ++i) {
    auto p = ft::shm::SnapshotCommSlot(*f.segment, i);
    if (!p) continue;
    std::printf("slot rank=%d comm=%016llx comm_rank=%d size=%d entered=%llu started=%llu completed=%llu op=%u\n",
                f.rank, static_cast<unsigned long long>(p->comm_id), p->comm_rank, p->comm_size,
                static_cast<unsigned long long>(p->entered_seq), static_cast<unsigned long long>(p->started_seq),
                static_cast<unsigned long long>(p->completed_seq), p->enter_op);
  }
  std::printf("end rank=%d state=%u dropped=%llu calls=%llu heartbeats=%llu\n", f.rank, h->state.load(),
              static_cast<unsigned long long>(h->ring_dropped.load()),
              static_cast<unsigned long long>(h->call_count.load()),
              static_cast<unsigned long long>(h->heartbeat_count.load()));
  f.done = true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string job;
  int ranks = 1;
  double timeout = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--job") job = argv[i + 1];
    else if (flag == "--ranks") ranks = std::atoi(argv[i + 1]);
    else if (flag == "--timeout") timeout = std::atof(argv[i + 1]);
  }
  if (job.empty()) {
    std::fprintf(stderr, "usage: ft_drain --job J --ranks N [--timeout S]\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOFBF, 1 << 20);
  std::string prefix = ft::shm::SegmentPrefix(job).substr(1);
  std::map<std::string, Followed> followed;
  double deadline = NowS() + timeout;
  while (NowS() < deadline) {
    if (DIR* dir = opendir("/dev/shm")) {
      while (struct dirent* e = readdir(dir)) {
        std::string name = e->d_name;
        if (name.compare(0, prefix.size(), prefix) != 0 || followed.count(name)) continue;
        Followed f;
        if (!Segment::Attach("/" + name, &f.segment).ok()) continue;  // not ready: next round
        f.reader = std::make_unique<ft::shm::RingReader>(*f.segment);
        f.rank = f.segment->header()->global_rank;
        std::printf("segment rank=%d pid=%d name=%s\n", f.rank, f.segment->header()->pid, name.c_str());
        followed.emplace(name, std::move(f));
      }
      closedir(dir);
    }
    int finished = 0;
    for (auto& [name, f] : followed) {
      if (f.done) {
        ++finished;
        continue;
      }
      uint32_t state = f.segment->header()->state.load();
      bool gone = kill(f.segment->header()->pid, 0) != 0 && errno == ESRCH;
      if (state == static_cast<uint32_t>(ft::shm::ProcessState::kExited) || gone) {
        Finish(f);
        ++finished;
      } else {
        Drain(f);
      }
    }
    std::fflush(stdout);
    if (static_cast<int>(followed.size()) >= ranks && finished == static_cast<int>(followed.size())) {
      return 0;
    }
    struct timespec ts{0, 2000000};
    nanosleep(&ts, nullptr);
  }
  std::fprintf(stderr, "ft_drain: timed out with %zu segments seen\n", followed.size());
  return 1;
}

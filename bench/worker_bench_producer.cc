// worker_bench_producer: one synthetic training rank for `make bench-worker`. It writes its
// segment exactly the way libft.so does (shm::Segment::Create, CommTableWriter, RingWriter;
// records as shm/records.h defines them), at a steady, paced rate, so ftworker can be
// measured against 8 such ranks without a GPU, gpusim or NCCL in the way.
//
//   worker_bench_producer --job J --rank R [--world-size 8] [--local-rank R] [--node n0]
//                         [--tp 2] [--rate 10000] [--layers 15] [--hang-after S]
//                         [--duration S] [--ring-records 16384] [--epoch-ns T]
//
// The rank belongs to two communicators, as in a dp x tp job: its tensor-parallel group
// (ranks R - R % tp .. + tp - 1) and its data-parallel group (ranks with the same R % tp).
// Their ids are the same on every member and sequence numbers count each comm's collectives,
// so the worker sees what it would see from libft.so. One step is, per layer, a tp allreduce
// forward and one backward, then the dp gradient allreduce and a small dp loss allreduce;
// every op is entered, started on the "GPU" and completed, with the table updated at each
// stage (EnterOp by the "app thread", Started/Completed by the "poller") and a kOpEnter,
// kOpStart and kOpEnd record. Ops follow each other at a fixed spacing so the rate is exact:
// 3 records per op, spacing = 3 / rate. Op k of the run is entered at epoch + k x spacing
// (--epoch-ns, CLOCK_MONOTONIC; the driver gives every rank the same one), so, as in a real
// job, members of a communicator are at the same sequence number at the same time.
//
// Pacing: like libft.so's poller the producer wakes every millisecond (absolute deadlines, so
// no drift), advances the heartbeat, and writes every record whose time has come. A late
// wake-up (a busy machine) writes what is due at once rather than dropping it, so the
// achieved rate falls short only if the process is starved for longer than the run.
//
// Hang: SIGUSR1 (or --hang-after S seconds) makes the next op a collective that is entered and
// started but never completes — what a rank inside a hung NCCL kernel looks like. The
// producer prints one line with the op's started time (CLOCK_MONOTONIC ns, the clock the
// worker measures ages with), then keeps only its heartbeat going. SIGUSR2 completes the hung
// op and rejoins the schedule at the current time, its sequence numbers where its peers' are
// now (no catch-up burst; as if the ops in between had happened unrecorded), so a later hang
// of a peer does not find this rank behind it. SIGTERM/SIGINT: a clean
// exit as libft.so makes one (exit_status, state Exited, segment removed).
//
// Output, one line each on stdout (line-buffered, for the driver):
//   READY rank=R pid=P segment=NAME comm_tp=HEX comm_dp=HEX
//   HANG rank=R comm=HEX seq=N op=allreduce entered_ns=T started_ns=T
//   RESUME rank=R comm=HEX seq=N completed_ns=T
//   DONE rank=R records=N dropped=N seconds=S records_per_s=X
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/hash.h"
#include "shm/comm_table.h"
#include "shm/layout.h"
#include "shm/records.h"
#include "shm/ring.h"
#include "shm/segment.h"

namespace {

using ft::Status;
using ft::shm::CommOrigin;
using ft::shm::OpKind;
using ft::shm::RecordType;

constexpr uint64_t kNsPerS = 1'000'000'000;
constexpr uint64_t kTickNs = 1'000'000;  // libft.so's default FT_POLL_INTERVAL
constexpr uint32_t kNoneRoot = 0xffffffffu;
constexpr uint32_t kDtypeBf16 = 9;  // ncclBfloat16: only its byte size matters to the worker

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_hang = 0;
volatile sig_atomic_t g_resume = 0;

void OnStop(int) { g_stop = 1; }
void OnHang(int) { g_hang = 1; }
void OnResume(int) { g_resume = 1; }

uint64_t NowNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerS + static_cast<uint64_t>(ts.tv_nsec);
}
uint64_t MonoNs() { return NowNs(CLOCK_MONOTONIC); }

// splitmix64: comm ids that look like libft.so's (hashes), same on every member of a group.
uint64_t Mix(uint64_t x) {
  x = ft::SplitMix64(x);
  return x == 0 ? 1 : x;
}

struct Flags {
  std::string job;
  std::string node = "n0";
  int rank = -1;
  int local_rank = -1;
  int world_size = 8;
  int tp = 2;
  int layers = 15;
  double rate = 10000;        // records per second
  double hang_after_s = -1;   // < 0: only on SIGUSR1
  double duration_s = -1;     // < 0: until SIGTERM
  uint32_t ring_records = 16384;  // libft.so's FT_RING_RECORDS default
  uint64_t epoch_ns = 0;          // 0: when the producer starts
};

constexpr const char* kUsage =
    "usage: worker_bench_producer --job J --rank R [--world-size 8] [--local-rank R] [--node n0]\n"
    "         [--tp 2] [--layers 15] [--rate 10000] [--hang-after S] [--duration S]\n"
    "         [--ring-records 16384] [--epoch-ns T]\n"
    "One synthetic rank writing its segment as libft.so does (see the top of the source).\n"
    "Signals: SIGUSR1 hang in the next collective, SIGUSR2 complete it and go on, SIGTERM exit.\n";

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "worker_bench_producer: %s needs a value (try --help)\n", arg.c_str());
      return false;
    }
    const char* v = argv[++i];
    char* end = nullptr;
    errno = 0;
    auto number = [&](double* out) {
      *out = std::strtod(v, &end);
      return errno == 0 && end != v && *end == '\0';
    };
    auto integer = [&](int* out) {
      long n = std::strtol(v, &end, 10);
      *out = static_cast<int>(n);
      return errno == 0 && end != v && *end == '\0';
    };
    bool ok = true;
    if (arg == "--job") {
      f->job = v;
    } else if (arg == "--node") {
      f->node = v;
    } else if (arg == "--rank") {
      ok = integer(&f->rank);
    } else if (arg == "--local-rank") {
      ok = integer(&f->local_rank);
    } else if (arg == "--world-size") {
      ok = integer(&f->world_size);
    } else if (arg == "--tp") {
      ok = integer(&f->tp);
    } else if (arg == "--layers") {
      ok = integer(&f->layers);
    } else if (arg == "--rate") {
      ok = number(&f->rate);
    } else if (arg == "--hang-after") {
      ok = number(&f->hang_after_s);
    } else if (arg == "--duration") {
      ok = number(&f->duration_s);
    } else if (arg == "--epoch-ns") {
      unsigned long long n = std::strtoull(v, &end, 10);
      f->epoch_ns = n;
      ok = errno == 0 && end != v && *end == '\0';
    } else if (arg == "--ring-records") {
      int n = 0;
      ok = integer(&n) && n > 0;
      f->ring_records = static_cast<uint32_t>(n);
    } else {
      std::fprintf(stderr, "worker_bench_producer: unknown argument '%s' (try --help)\n", arg.c_str());
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "worker_bench_producer: %s: '%s' is not a valid number\n", arg.c_str(), v);
      return false;
    }
  }
  if (f->job.empty() || f->rank < 0) {
    std::fprintf(stderr, "worker_bench_producer: --job and --rank are required (try --help)\n");
    return false;
  }
  if (f->local_rank < 0) f->local_rank = f->rank;
  if (f->rank >= f->world_size) {
    std::fprintf(stderr, "worker_bench_producer: --rank %d is not below --world-size %d\n", f->rank,
                 f->world_size);
    return false;
  }
  if (f->tp < 1 || f->world_size % f->tp != 0) {
    std::fprintf(stderr, "worker_bench_producer: --tp %d must divide --world-size %d\n", f->tp,
                 f->world_size);
    return false;
  }
  if (f->layers < 1 || !(f->rate >= 30 && f->rate <= 3e6)) {
    std::fprintf(stderr, "worker_bench_producer: --layers must be >= 1 and --rate in [30, 3e6] "
                 "records/s (got %d, %g)\n", f->layers, f->rate);
    return false;
  }
  if ((f->ring_records & (f->ring_records - 1)) != 0) {
    std::fprintf(stderr, "worker_bench_producer: --ring-records %u is not a power of two\n", f->ring_records);
    return false;
  }
  return true;
}

// One communicator as this rank sees it.
struct Comm {
  uint64_t id = 0;
  uint32_t slot = 0;
  int comm_rank = 0;
  int comm_size = 0;
  uint64_t seq = 0;  // collectives entered so far
  // Ops of this comm in one step, and before each position of the step pattern: the seq of
  // op k of the run follows from k alone (SyncTo).
  uint64_t per_step = 0;
  std::vector<uint64_t> before;
};

// One op of the step pattern: which comm, what, how big, and how long its GPU part takes as
// a fraction of the op spacing (so any --rate keeps ops from overlapping).
struct OpShape {
  Comm* comm;
  OpKind kind;
  uint64_t bytes;
  double gpu_fraction;
};

class Producer {
 public:
  explicit Producer(const Flags& flags) : flags_(flags) {}

  Status Open() {
    ft::shm::Identity id;
    id.job = flags_.job;
    id.node = flags_.node;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    id.host = host;
    id.global_rank = flags_.rank;
    id.local_rank = flags_.local_rank;
    id.world_size = flags_.world_size;
    ft::shm::SegmentOptions options;
    options.ring_capacity = flags_.ring_records;
    options.comm_slots = 64;  // libft.so's FT_COMM_SLOTS default
    Status s = ft::shm::Segment::Create(ft::shm::SegmentName(flags_.job, flags_.rank, getpid()), id,
                                        getpid(), options, &segment_);
    if (!s.ok()) return s;
    table_ = std::make_unique<ft::shm::CommTableWriter>(*segment_);
    ring_ = std::make_unique<ft::shm::RingWriter>(*segment_);

    // tp group g = rank / tp; dp group c = rank % tp. Ids hash the group so members agree.
    const int tp_group = flags_.rank / flags_.tp;
    const int dp_group = flags_.rank % flags_.tp;
    tp_.id = Mix(0x7470000000000000ull ^ (static_cast<uint64_t>(tp_group) << 8));
    tp_.comm_rank = flags_.rank % flags_.tp;
    tp_.comm_size = flags_.tp;
    dp_.id = Mix(0x6470000000000000ull ^ (static_cast<uint64_t>(dp_group) << 8));
    dp_.comm_rank = flags_.rank / flags_.tp;
    dp_.comm_size = flags_.world_size / flags_.tp;
    uint64_t now = MonoNs();
    for (Comm* c : {&tp_, &dp_}) {
      // What ncclCommInitRank does under libft.so: a table slot, then the kCommInit record.
      std::optional<uint32_t> slot = table_->Claim(c->id, c->comm_rank, c->comm_size, flags_.rank);
      if (!slot) return Status::Internal("the in-flight table of a fresh segment is full");
      c->slot = *slot;
      ft::shm::Record r = MakeRecord(RecordType::kCommInit, c->slot, c->id, 0, now);
      r.flags = static_cast<uint16_t>(CommOrigin::kInit);
      r.a = static_cast<uint32_t>(c->comm_rank) | (uint64_t{static_cast<uint32_t>(c->comm_size)} << 32);
      r.b = static_cast<uint64_t>(flags_.rank);
      Push(r);
    }
    for (int l = 0; l < flags_.layers; ++l) {
      pattern_.push_back(OpShape{&tp_, OpKind::kAllReduce, 8ull << 20, 0.40});  // forward
      pattern_.push_back(OpShape{&tp_, OpKind::kAllReduce, 8ull << 20, 0.45});  // backward
    }
    pattern_.push_back(OpShape{&dp_, OpKind::kAllReduce, 200ull << 20, 0.60});  // gradients
    pattern_.push_back(OpShape{&dp_, OpKind::kAllReduce, 4, 0.10});             // loss
    for (Comm* c : {&tp_, &dp_}) {
      for (const OpShape& op : pattern_) {
        c->before.push_back(c->per_step);
        if (op.comm == c) ++c->per_step;
      }
    }
    spacing_ns_ = static_cast<uint64_t>(3.0 * 1e9 / flags_.rate);
    return Status::Ok();
  }

  int Run() {
    std::printf("READY rank=%d pid=%d segment=%s comm_tp=%016" PRIx64 " comm_dp=%016" PRIx64 "\n",
                flags_.rank, getpid(), segment_->name().c_str(), tp_.id, dp_.id);
    const uint64_t start = MonoNs();
    const uint64_t head_at_start = segment_->header()->ring_head.load(std::memory_order_relaxed);
    const uint64_t hang_at = flags_.hang_after_s >= 0 ? start + static_cast<uint64_t>(flags_.hang_after_s * 1e9) : 0;
    const uint64_t stop_at = flags_.duration_s >= 0 ? start + static_cast<uint64_t>(flags_.duration_s * 1e9) : 0;
    epoch_ns_ = flags_.epoch_ns != 0 ? flags_.epoch_ns : start;
    SyncTo(start);
    uint64_t wake = start;
    while (!g_stop) {
      uint64_t now = MonoNs();
      if (stop_at != 0 && now >= stop_at) break;
      ft::shm::SegmentHeader* h = segment_->header();
      // The poller's heartbeat: every round, hung or not (a hung rank is alive).
      h->heartbeat_ns.store(now, std::memory_order_relaxed);
      h->heartbeat_count.fetch_add(1, std::memory_order_relaxed);
      if (hang_at != 0 && now >= hang_at && !hung_ && !hanged_once_) g_hang = 1;
      if (hung_ && g_resume) Resume();
      g_resume = 0;
      if (hung_) g_hang = 0;  // already hung: a second SIGUSR1 must not hang again after SIGUSR2
      if (!hung_) {
        while (next_op_ns_ + spacing_ns_ <= now && !g_hang) {
          // The whole op lies in the past: enter, start and end it with its scheduled times.
          EmitOp(pattern_[op_index_ % pattern_.size()]);
        }
        if (g_hang) {
          g_hang = 0;
          Hang(pattern_[op_index_ % pattern_.size()]);
        }
      }
      // Absolute deadlines: a late wake-up does not shift every later one.
      wake += kTickNs;
      if (wake < now) wake = now - now % kTickNs + kTickNs;
      timespec ts{static_cast<time_t>(wake / kNsPerS), static_cast<long>(wake % kNsPerS)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR && !g_stop && !g_hang &&
             !g_resume) {
      }
    }
    const double seconds = static_cast<double>(MonoNs() - start) / 1e9;
    const uint64_t head = segment_->header()->ring_head.load(std::memory_order_relaxed);
    const uint64_t dropped = segment_->header()->ring_dropped.load(std::memory_order_relaxed);
    std::printf("DONE rank=%d records=%" PRIu64 " dropped=%" PRIu64 " seconds=%.3f records_per_s=%.0f\n",
                flags_.rank, head, dropped, seconds,
                seconds > 0 ? static_cast<double>(head - head_at_start) / seconds : 0.0);
    Close(0);
    return 0;
  }

 private:
  static ft::shm::Record MakeRecord(RecordType type, uint32_t slot, uint64_t comm, uint64_t seq, uint64_t t) {
    ft::shm::Record r{};
    r.type = static_cast<uint16_t>(type);
    r.comm_slot = slot;
    r.time_ns = t;
    r.comm_id = comm;
    r.seq = seq;
    return r;
  }

  // Counted by the ring itself (ring_dropped) when full, as in libft.so: never waits.
  void Push(const ft::shm::Record& r) { (void)ring_->Push(r); }

  static uint64_t OpA(OpKind kind) {
    return static_cast<uint64_t>(kind) | (uint64_t{kDtypeBf16} << 8) | (uint64_t{kNoneRoot} << 32);
  }

  // What ncclAllReduce does under libft.so: the call (last_call_ns), the table's entered
  // group and the kOpEnter record on the app thread.
  uint64_t Enter(const OpShape& op, uint64_t t) {
    Comm& c = *op.comm;
    const uint64_t seq = ++c.seq;
    ft::shm::SegmentHeader* h = segment_->header();
    h->last_call_ns.store(t, std::memory_order_relaxed);
    h->call_count.fetch_add(1, std::memory_order_relaxed);
    table_->EnterOp(c.slot, seq, static_cast<uint32_t>(op.kind), op.bytes, -1, t);
    ft::shm::Record r = MakeRecord(RecordType::kOpEnter, c.slot, c.id, seq, t);
    r.a = OpA(op.kind);
    r.b = op.bytes;
    r.c = 0x7f0000001000ull;  // a stream handle; the worker does not interpret it
    r.d = op.bytes / 2;       // bf16 elements
    Push(r);
    return seq;
  }

  // What the poller does when it sees the op's start event reached.
  void Start(const OpShape& op, uint64_t seq, uint64_t t) {
    Comm& c = *op.comm;
    table_->Started(c.slot, seq, t);
    ft::shm::Record r = MakeRecord(RecordType::kOpStart, c.slot, c.id, seq, t);
    r.a = OpA(op.kind);
    Push(r);
  }

  void End(const OpShape& op, uint64_t seq, uint64_t entered, uint64_t started, uint64_t t) {
    Comm& c = *op.comm;
    table_->Completed(c.slot, seq, t, t - started);
    ft::shm::Record r = MakeRecord(RecordType::kOpEnd, c.slot, c.id, seq, t);
    r.a = OpA(op.kind);
    r.b = t - started;
    r.c = entered;
    Push(r);
  }

  void EmitOp(const OpShape& op) {
    const uint64_t entered = next_op_ns_;
    const uint64_t queued = spacing_ns_ / 20;  // the GPU reaches the op a little after the call
    const uint64_t started = entered + queued;
    const uint64_t ended = started + static_cast<uint64_t>(op.gpu_fraction * static_cast<double>(spacing_ns_));
    const uint64_t seq = Enter(op, entered);
    Start(op, seq, started);
    End(op, seq, entered, started, ended);
    next_op_ns_ += spacing_ns_;
    ++op_index_;
  }

  // The op is entered and reaches the GPU now, and never completes (until SIGUSR2).
  void Hang(const OpShape& op) {
    const uint64_t entered = MonoNs();
    const uint64_t seq = Enter(op, entered);
    const uint64_t started = MonoNs();
    Start(op, seq, started);
    hung_ = true;
    hanged_once_ = true;
    hung_op_ = &op;
    hung_seq_ = seq;
    hung_entered_ns_ = entered;
    hung_started_ns_ = started;
    // The op's name as the worker reports it (ftworker/monitor/op_names.cc); the pattern has only
    // allreduces.
    std::printf("HANG rank=%d comm=%016" PRIx64 " seq=%" PRIu64 " op=allreduce entered_ns=%" PRIu64
                " started_ns=%" PRIu64 "\n",
                flags_.rank, op.comm->id, seq, entered, started);
  }

  void Resume() {
    const uint64_t now = MonoNs();
    End(*hung_op_, hung_seq_, hung_entered_ns_, hung_started_ns_, now);
    std::printf("RESUME rank=%d comm=%016" PRIx64 " seq=%" PRIu64 " completed_ns=%" PRIu64 "\n",
                flags_.rank, hung_op_->comm->id, hung_seq_, now);
    hung_ = false;
    SyncTo(now);
  }

  // Moves to the first op of the schedule entered at or after `now`, with every comm's seq
  // where the schedule has it there.
  void SyncTo(uint64_t now) {
    uint64_t k = now <= epoch_ns_ ? 0 : (now - epoch_ns_ + spacing_ns_ - 1) / spacing_ns_;
    const uint64_t n = pattern_.size();
    for (Comm* c : {&tp_, &dp_}) c->seq = (k / n) * c->per_step + c->before[k % n];
    op_index_ = k;
    next_op_ns_ = epoch_ns_ + k * spacing_ns_;
  }

  // A clean exit, as libft.so's exit handler makes it.
  void Close(int status) {
    ft::shm::SegmentHeader* h = segment_->header();
    h->exit_status.store(status, std::memory_order_relaxed);
    h->state.store(static_cast<uint32_t>(ft::shm::ProcessState::kExited), std::memory_order_release);
    Status s = segment_->Remove();
    if (!s.ok()) std::fprintf(stderr, "worker_bench_producer: rank %d: %s\n", flags_.rank, s.ToString().c_str());
  }

  Flags flags_;
  std::unique_ptr<ft::shm::Segment> segment_;
  std::unique_ptr<ft::shm::CommTableWriter> table_;
  std::unique_ptr<ft::shm::RingWriter> ring_;
  Comm tp_, dp_;
  std::vector<OpShape> pattern_;
  uint64_t spacing_ns_ = 0;
  uint64_t epoch_ns_ = 0;
  uint64_t next_op_ns_ = 0;
  uint64_t op_index_ = 0;
  bool hung_ = false;
  bool hanged_once_ = false;
  const OpShape* hung_op_ = nullptr;
  uint64_t hung_seq_ = 0;
  uint64_t hung_entered_ns_ = 0;
  uint64_t hung_started_ns_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  setvbuf(stdout, nullptr, _IOLBF, 0);  // the driver reads line by line through a pipe

  struct sigaction sa = {};
  sa.sa_handler = OnStop;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = OnHang;
  sigaction(SIGUSR1, &sa, nullptr);
  sa.sa_handler = OnResume;
  sigaction(SIGUSR2, &sa, nullptr);

  Producer producer(flags);
  Status s = producer.Open();
  if (!s.ok()) {
    std::fprintf(stderr,
                 "worker_bench_producer: rank %d: cannot create its segment: %s (is /dev/shm full or "
                 "a stale /dev/shm/ft.%s.* left behind?)\n",
                 flags.rank, s.ToString().c_str(), flags.job.c_str());
    return 1;
  }
  return producer.Run();
}

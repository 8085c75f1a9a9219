// Test helpers: synthetic rank segments written the way libft.so writes them (Segment::Create,
// CommTableWriter, RingWriter), a log capture, a fake process probe.
#ifndef FT_FTWORKER_TESTS_TEST_UTIL_H_
#define FT_FTWORKER_TESTS_TEST_UTIL_H_

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/log.h"
#include "ftworker/monitor/node_monitor.h"
#include "ftworker/monitor/process_probe.h"
#include "ftworker/monitor/rank_monitor.h"
#include "proto/messages.h"
#include "shm/comm_table.h"
#include "shm/records.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "tests/util/log_capture.h"

namespace ft::worker::testing {

using shm::OpKind;
using shm::RecordType;

inline uint64_t MonoNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A NodeMonitor as the tests drive it: every Tick scans and adopts new segments at once.
// `probe` null: the real kill(2) and /proc.
inline NodeMonitorOptions MonitorOptions(const std::string& job, ProcessProbe* probe,
                                         const std::string& node = "n1") {
  NodeMonitorOptions o;
  o.job = job;
  o.node = node;
  o.scan_interval_ns = 0;
  o.settle_ns = 0;
  o.probe = probe;
  return o;
}

inline constexpr uint64_t kMs = 1'000'000;
inline constexpr uint64_t kSec = 1'000'000'000;

// Unique per test (and per process, so parallel ctest runs do not collide).
inline std::string UniqueJob(const std::string& what) {
  static std::atomic<int> counter{0};
  return "wt" + std::to_string(getpid()) + "_" + what + std::to_string(counter++);
}

inline uint32_t Op(OpKind op) { return static_cast<uint32_t>(op); }

// One rank's segment, written as libft.so would. Removed at destruction.
class FakeRank {
 public:
  FakeRank(const std::string& job, int rank, int pid = getpid(), const std::string& node = "n1",
           shm::SegmentOptions options = {1024, 16}) {
    shm::Identity id;
    id.job = job;
    id.node = node;
    id.host = "host-" + node;
    id.global_rank = rank;
    id.local_rank = rank;
    id.world_size = 8;
    name_ = shm::SegmentName(job, rank, pid);
    Status s = shm::Segment::Create(name_, id, pid, options, &seg_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    table_ = std::make_unique<shm::CommTableWriter>(*seg_);
    ring_ = std::make_unique<shm::RingWriter>(*seg_);
  }
  ~FakeRank() {
    if (seg_) (void)seg_->Remove();
  }
  FakeRank(const FakeRank&) = delete;
  FakeRank& operator=(const FakeRank&) = delete;

  shm::Segment& seg() { return *seg_; }
  shm::SegmentHeader* header() { return seg_->header(); }
  const std::string& name() const { return name_; }

  void Push(RecordType type, uint16_t flags, uint32_t slot, uint64_t comm, uint64_t seq, uint64_t t,
            uint64_t a = 0, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
    shm::Record r{};
    r.type = static_cast<uint16_t>(type);
    r.flags = flags;
    r.comm_slot = slot;
    r.time_ns = t;
    r.comm_id = comm;
    r.seq = seq;
    r.a = a;
    r.b = b;
    r.c = c;
    r.d = d;
    ring_->Push(r);
  }

  // A communicator: its table slot and its kCommInit record.
  uint32_t CommInit(uint64_t comm, int comm_rank, int comm_size, uint64_t t = 1) {
    uint32_t slot = *table_->Claim(comm, comm_rank, comm_size, header()->global_rank);
    slots_[comm] = slot;
    Push(RecordType::kCommInit, 1, slot, comm, 0, t,
         shm::CommRankWord(comm_rank, comm_size),
         static_cast<uint64_t>(header()->global_rank));
    return slot;
  }
  // The second slot of a comm that counts its p2p ops (as preload/comm_registry.cc claims it).
  uint32_t P2PSlot(uint64_t comm, bool set_flag) {
    uint64_t id = shm::P2PSlotId(comm);
    uint32_t slot = *table_->Claim(id, 0, 2, header()->global_rank, set_flag ? shm::kCommSlotP2P : 0);
    p2p_slots_[comm] = slot;
    return slot;
  }

  uint64_t A(uint32_t op, int64_t peer = -1) {
    return shm::OpArgsWord(static_cast<shm::OpKind>(op), 0, static_cast<int32_t>(peer));
  }
  // A collective: entered (record + table).
  void Enter(uint64_t comm, uint64_t seq, uint32_t op, uint64_t bytes, uint64_t t) {
    uint32_t slot = slots_.at(comm);
    table_->EnterOp(slot, seq, op, bytes, -1, t);
    Push(RecordType::kOpEnter, 0, slot, comm, seq, t, A(op), bytes);
  }
  void Start(uint64_t comm, uint64_t seq, uint32_t op, uint64_t t) {
    uint32_t slot = slots_.at(comm);
    table_->Started(slot, seq, t);
    Push(RecordType::kOpStart, 0, slot, comm, seq, t, A(op));
  }
  void End(uint64_t comm, uint64_t seq, uint32_t op, uint64_t started, uint64_t t, uint64_t entered = 0) {
    uint32_t slot = slots_.at(comm);
    table_->Completed(slot, seq, t, t - started);
    Push(RecordType::kOpEnd, 0, slot, comm, seq, t, A(op), t - started, entered);
  }
  // A whole collective: enter at t, GPU from t + queue to t + queue + dur.
  void Collective(uint64_t comm, uint64_t seq, uint32_t op, uint64_t bytes, uint64_t t, uint64_t queue,
          uint64_t dur) {
    Enter(comm, seq, op, bytes, t);
    Start(comm, seq, op, t + queue);
    End(comm, seq, op, t + queue, t + queue + dur, t);
  }
  // `symbol`: shm::ApiSymbolId of its name (a .def index when the segment's record version is 1).
  void Error(uint64_t library, uint64_t symbol, uint64_t code, uint64_t t = 1) {
    Push(RecordType::kApiError, shm::kFlagError, 0xffffffff, 0, 0, t, library, symbol, code);
  }
  void Exit(int status) {
    header()->exit_status.store(status);
    header()->state.store(static_cast<uint32_t>(shm::ProcessState::kExited));
  }

 private:
  std::string name_;
  std::unique_ptr<shm::Segment> seg_;
  std::unique_ptr<shm::CommTableWriter> table_;
  std::unique_ptr<shm::RingWriter> ring_;
  std::map<uint64_t, uint32_t> slots_;
  std::map<uint64_t, uint32_t> p2p_slots_;
};

using LogCapture = test_util::LogCapture;

// Processes as the test says they are; unknown pids are alive with no /proc entry.
class FakeProbe : public ProcessProbe {
 public:
  struct Proc {
    bool exists = true;
    ProcStat stat{'S', 1000, 0, std::nullopt};
    bool has_stat = true;
    std::optional<uint64_t> run_delay_ns;  // /proc/<pid>/schedstat's run-queue wait
    int64_t uid = -1;  // -1: whatever uid the segment claims
  };
  std::map<int, Proc> procs;
  std::vector<std::pair<int, int>> signals;  // (verified pid, signal)
  std::vector<ProcessClaim> verified;         // every Verify() call

  bool PidExists(int pid) override {
    auto it = procs.find(pid);
    return it == procs.end() || it->second.exists;
  }
  std::optional<ProcStat> ReadStat(int pid) override {
    auto it = procs.find(pid);
    if (it == procs.end() || !it->second.exists || !it->second.has_stat) return std::nullopt;
    return it->second.stat;
  }
  std::optional<uint64_t> ReadRunDelayNs(int pid) override {
    auto it = procs.find(pid);
    if (it == procs.end() || !it->second.exists) return std::nullopt;
    return it->second.run_delay_ns;
  }
  uint64_t TicksPerSecond() override { return 100; }
  int64_t BootTimeUnixS() override { return 0; }
  Status Verify(const ProcessClaim& claim, VerifiedProcess* out) override {
    verified.push_back(claim);
    auto it = procs.find(claim.pid);
    if (it != procs.end() && !it->second.exists) return Status::NotFound("no such process");
    if (it != procs.end() && it->second.uid >= 0 && it->second.uid != claim.uid) {
      return Status::Corrupt("process " + std::to_string(claim.pid) + " belongs to uid " +
                             std::to_string(it->second.uid));
    }
    *out = VerifiedProcess(claim.pid, -1, it != procs.end() ? it->second.stat.start_ticks : 0);
    return Status::Ok();
  }
  Status Signal(const VerifiedProcess& process, int signal) override {
    signals.emplace_back(process.pid(), signal);
    return Status::Ok();
  }
};

inline const proto::Event* FindEvent(const std::vector<proto::Event>& events, const std::string& kind,
                                     int rank = -2) {
  for (const auto& e : events) {
    if (e.kind == kind && (rank == -2 || e.rank == rank)) return &e;
  }
  return nullptr;
}

inline size_t CountEvents(const std::vector<proto::Event>& events, const std::string& kind) {
  size_t n = 0;
  for (const auto& e : events) n += e.kind == kind ? 1 : 0;
  return n;
}

}  // namespace ft::worker::testing

#endif  // FT_FTWORKER_TESTS_TEST_UTIL_H_

// A communicator: the process-local state of one member (CommCore) behind the opaque handle
// the application holds (struct ncclComm). The handle owns one reference to the core; every
// operation queued on a stream owns another, so a stream that runs an operation after the
// application destroyed or aborted the communicator still finds valid (stopped) state.
#ifndef GPUSIM_NCCL_COMM_H_
#define GPUSIM_NCCL_COMM_H_

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config.h"
#include "reduce.h"
#include "segment.h"

namespace gpusim::nccl {

class CommCore {
 public:
  CommCore(const ncclConfig_t* config, int fallback_blocking);
  ~CommCore();
  CommCore(const CommCore&) = delete;
  CommCore& operator=(const CommCore&) = delete;

  // Identity. Set by Setup() before init runs (for a split: by the init job, after the
  // exchange); readers on other threads first check init_state (acquire).
  void Setup(const ncclUniqueId& id, int nranks, int rank);
  std::atomic<bool> has_identity{false};  // Setup() done
  ncclUniqueId id{};
  uint64_t id_hash = 0;
  int nranks = 0;
  int rank = 0;
  int cuda_dev = 0;
  bool blocking = true;
  std::string name;  // config->commName, else "comm<k>" (k: this process's creation ordinal)
  Config cfg;        // environment at creation

  // Set by RunInit before init_state becomes ncclSuccess; immutable afterwards.
  std::unique_ptr<Segment> seg;
  std::string shm_name;
  uint64_t stall_at = kNoStall;
  int slow_ms = 0;  // GPUSIM_NCCL_SLOW: added to every collective once all members arrived

  // ncclInProgress until init finishes, then ncclSuccess or the init error.
  std::atomic<int> init_state{ncclInProgress};
  std::atomic<bool> cancel{false};   // abort/destroy while init is running
  std::atomic<bool> aborted{false};  // ncclCommAbort (or ncclCommShrink with NCCL_SHRINK_ABORT)
  std::atomic<bool> revoked{false};  // ncclCommRevoke: later calls fail with ncclInvalidUsage
  std::atomic<int> async_error{ncclSuccess};  // sticky error found while executing
  std::atomic<int> in_progress{0};            // background work not yet done (nonblocking)
  std::atomic<int> executing{0};    // ops of this comm inside a running host function
  std::atomic<int64_t> outstanding{0};  // ops queued on a stream (not captured) not yet finished

  // Execution state, touched by host functions on stream workers.
  std::atomic<uint64_t> coll_seq{0};   // collectives begun (the sequence number)
  std::atomic<uint64_t> coll_step{0};  // collective rounds completed
  std::atomic<void*> coll_owner{nullptr};  // the op using the collective slots
  std::unique_ptr<std::atomic<void*>[]> send_owner, recv_owner;  // per peer

  // Splits and shrinks, counted at call time so every member agrees.
  std::atomic<uint64_t> derive_ordinal{0};
  std::atomic<uint64_t> split_exchanges{0};
  std::atomic<uint64_t> exchanges_done{0};  // exchanges run strictly in ordinal order

  // True once this member aborted or revoked, or another member aborted or revoked.
  bool Stopped() const;
  // The other member (rank) that aborted or revoked, or -1.
  int RemoteStopper() const;
  // Wakes every waiter of this communicator (local or remote).
  void Ring() const;

  void SetLastError(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  const char* last_error() const { return last_error_; }

  // PreMulSum operators created on this communicator.
  // Enum arguments arrive as the raw int the application passed (may be out of range).
  ncclResult_t CreatePreMulSum(ncclRedOp_t* op, const void* scalar, int type, int residence);
  ncclResult_t DestroyRedOp(int op);
  // Resolves op for (type) into spec; false if op is not valid here.
  bool ResolveRedOp(int op, ncclDataType_t type, RedOpSpec* spec);

 private:
  struct UserOp {
    bool live = false;
    ncclDataType_t type = ncclFloat32;
    RedOpSpec spec;
  };
  std::mutex mu_;
  std::vector<UserOp> user_ops_;  // GUARDED_BY(mu_)
  char last_error_[1024] = {};    // GUARDED_BY(mu_) for writers
};

// The application's handle.
inline constexpr uint64_t kCommMagic = 0x6d6d6f636d697367ull;  // "gsimcomm"
// A destroyed or aborted communicator's handle. Handles are never freed (a few dozen bytes
// each): a later call on one is detected (violation.h) rather than undefined.
inline constexpr uint64_t kDeadCommMagic = 0x646165646d6d6f63ull;  // "commdead"
}  // namespace gpusim::nccl

struct ncclComm {
  std::atomic<uint64_t> magic{gpusim::nccl::kCommMagic};
  // Atomic: a thread that calls in while another destroys the communicator (a violation, but
  // one gpusim must survive to report) reads it while it is being cleared.
  std::atomic<std::shared_ptr<gpusim::nccl::CommCore>> core;
  // The thread (tid) inside ncclCommDestroy/ncclCommAbort, 0 none.
  std::atomic<int> ender{0};
  ncclComm* next_dead = nullptr;  // the list of tombstones (reachable: no leak report)
};

namespace gpusim::nccl {

// The process-wide last error (ncclGetLastError(NULL)); also copied into the comm's if given.
void SetGlobalLastError(const char* msg);
const char* GlobalLastError();

// Reads blocking/commName from a user config; 0 if config is null or malformed -> error.
// blocking_out: 1/0, or -1 if the config leaves it undefined.
ncclResult_t ReadUserConfig(const ncclConfig_t* config, int* blocking_out, const char** name_out);

// Joins the segment of core (Setup() done) and publishes init_state. Blocking.
ncclResult_t RunInit(const std::shared_ptr<CommCore>& core);

// The split exchange: every member of parent posts (color, key); returns all members'
// entries in parent rank order. Blocking (timeout: the init timeout).
ncclResult_t SplitExchange(CommCore* parent, uint64_t exchange, int color, int key,
                           std::vector<CtrlEntry>* all);

// Process-wide creation counter for default names.
uint64_t NextCreationOrdinal();

// Spins, then sleeps on the doorbell of `seg` until pred() holds or deadline/stop; returns
// pred() at exit. Used by the host-side waits (split exchange, abort).
bool WaitUntil(const Segment* seg, int64_t deadline_ns, const std::function<bool()>& pred);

}  // namespace gpusim::nccl

#endif  // GPUSIM_NCCL_COMM_H_

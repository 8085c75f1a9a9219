// libft.so's process-wide state and the non-template halves of the wrappers' hooks.
//
// State machine: kUninit until the first intercepted call, which runs Init once (reads the
// configuration, creates the segment, starts the poller); then kActive, or kPassThrough when
// FT_ENABLE=0, anything failed (fail-open), after fork() in the child, or after exit began.
// In kPassThrough every wrapper only forwards.
//
// Threads: app threads call the hooks (any number, concurrently); the poller thread observes
// events, writes progress, heartbeat and mailbox acks. Every hook is noexcept and never waits
// on the poller: records go through a queue of the thread's own (record_queue.h), registries
// and pools are lock-free tables; the one lock left, around in-flight table slot claims when a
// communicator is made, is taken by app threads only, for a few instructions.
#ifndef FT_PRELOAD_RUNTIME_H_
#define FT_PRELOAD_RUNTIME_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "preload/real.h"
#include "shm/records.h"

namespace ft::preload {

// libft.so writes the record format of shm/records.h; its names are used unqualified here.
using shm::ApiLibrary;
using shm::CommOrigin;
using shm::MixId;
using shm::OpKind;
using shm::P2PSlotId;
using shm::RecordType;
using enum shm::RecordFlags;

enum State : int { kUninit = 0, kActive = 1, kPassThrough = 2 };

extern std::atomic<int> g_state;
// True while this thread runs libft.so code (and always on the poller thread): our own calls
// into the runtime or NCCL, and the real libraries' calls back into exported names, forward
// without hooks.
extern thread_local bool t_in_ft;

bool InitSlow() noexcept;

inline bool Intercepting() {
  if (t_in_ft) return false;
  int state = g_state.load(std::memory_order_acquire);
  if (state == kActive) return true;
  return state == kUninit && InitSlow();
}

class ReentryGuard {
 public:
  ReentryGuard() { t_in_ft = true; }
  ~ReentryGuard() { t_in_ft = false; }
  ReentryGuard(const ReentryGuard&) = delete;
  ReentryGuard& operator=(const ReentryGuard&) = delete;
};

// Header last_call_ns / call_count (coarse clock).
void NoteCall() noexcept;

// Categories of CALL(category) in cudart.def. kSync and kBlockingCopy calls may block the
// host until the GPU gets there: they are bracketed by SyncEnter/SyncExit, which maintain the
// header's blocked_since_ns / blocked_count (lock-free, no allocation).
enum class CallCategory { kLaunch, kMemcpy, kBlockingCopy, kSync, kOther };
void SyncEnter() noexcept;
void SyncExit() noexcept;

class BlockedScope {
 public:
  BlockedScope() { SyncEnter(); }
  ~BlockedScope() { SyncExit(); }
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;
};

// ---- NCCL ----
struct Pending;
struct CommInfo;

// One op between its pre- and post-hook, on the calling thread's stack.
struct OpCall {
  CommInfo* comm = nullptr;
  ncclComm_t handle = nullptr;
  Pending* pending = nullptr;  // ungrouped, timed ops
  uint64_t seq = 0;
  uint16_t flags = 0;
  bool grouped = false;
};

void NcclPreOp(OpCall* call, OpKind op, bool p2p, size_t count, ncclDataType_t dtype, int peer,
               ncclComm_t comm, cudaStream_t stream) noexcept;
void NcclPostOp(OpCall* call, NcclSym sym, ncclResult_t result) noexcept;
void NcclGroupStartPost(ncclResult_t result) noexcept;
// Returns an opaque token for the post-hook (nullptr: not the outermost end).
void* NcclGroupEndPre() noexcept;
void NcclGroupEndPost(void* token, ncclResult_t result) noexcept;
void NcclInitPost(NcclSym sym, ncclResult_t result, ncclComm_t* out, int nranks, int rank,
                  const ncclUniqueId* ids, int nids) noexcept;
void NcclInitAllPost(ncclResult_t result, ncclComm_t* out, int ndev) noexcept;
// Split and shrink: the ordinal is taken before the call (every member calls in the same
// order, so it is equal on every member).
uint32_t NcclNextOrdinal(ncclComm_t parent) noexcept;
void NcclSplitPost(ncclResult_t result, ncclComm_t parent, uint32_t ordinal, int color,
                   ncclComm_t* out) noexcept;
void NcclShrinkPost(ncclResult_t result, ncclComm_t parent, uint32_t ordinal, const int* excluded,
                    int nexcluded, ncclComm_t* out) noexcept;
// ncclCommDestroy/ncclCommAbort: before the real call the comm is marked ended and the poller
// is out of it (NCCL forbids other threads in a comm being aborted); after it, the handle is
// never used again (the token carries what the post-hook needs).
CommInfo* NcclEndCommPre(ncclComm_t comm) noexcept;
void NcclEndCommPost(NcclSym sym, CommInfo* ended, ncclResult_t result) noexcept;
void NcclApiError(NcclSym sym, ncclResult_t result, ncclComm_t comm) noexcept;

// ---- CUDA runtime ----
void CudaApiError(CudaSym sym, cudaError_t result) noexcept;
Pending* CudaGraphPre(cudaStream_t stream) noexcept;
void CudaGraphPost(Pending* pending, cudaStream_t stream, cudaError_t result) noexcept;
void CudaAllocPost(void** ptr, size_t bytes, cudaError_t result) noexcept;
void CudaFreePost(void* ptr, cudaError_t result) noexcept;
void CudaRegisterFunctionPost(const char* host_fun, const char* device_name) noexcept;
void CudaKernelHandlePost(cudaKernel_t* handle, const void* host_stub, cudaError_t result) noexcept;

// For tests: what the process is doing now.
struct RuntimeStats {
  uint64_t pending = 0;          // ops waiting for their events
  uint64_t events_created = 0;
  uint64_t ops_entered = 0;
};
RuntimeStats GetRuntimeStats() noexcept;

}  // namespace ft::preload

#endif  // FT_PRELOAD_RUNTIME_H_

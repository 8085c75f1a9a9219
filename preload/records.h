// The ring records libft.so writes (shm::Record, 64 bytes) and the op kinds it puts into the
// in-flight table. Part of the segment contract: documented in docs/shm-format.md (Records),
// read by ftworker and the tests. Append new values; never renumber.
#ifndef FT_PRELOAD_RECORDS_H_
#define FT_PRELOAD_RECORDS_H_

#include <cstdint>

namespace ft::preload {

// Record::type.
enum class RecordType : uint16_t {
  // A communicator this process joined. comm_id; seq 0; a = comm rank | comm size << 32;
  // b = global rank; c = parent comm id (0 none); d = ordinal on the parent << 32 | u32 color,
  // flags = CommOrigin.
  kCommInit = 1,
  // An op entered (host time). comm_id, seq (collectives: per comm; p2p: per (comm, peer,
  // direction)); a = OpKind | dtype << 8 | u32 root-or-peer << 32 (0xffffffff none);
  // b = bytes (count x element size of the count argument); c = stream; d = count.
  kOpEnter = 2,
  // The GPU reached the op (observed by the poller). comm_id, seq and a as in its kOpEnter.
  kOpStart = 3,
  // The op completed (observed). comm_id, seq and a as in its kOpEnter; b = duration ns
  // (observed completion minus observed start, see docs/shm-format.md); c = entered time ns.
  kOpEnd = 4,
  // A wrapped call returned an error; the app got it unchanged. a = ApiLibrary; b = index of
  // the symbol in its .def list; c = the returned code; comm_id set for NCCL ops when known.
  kApiError = 5,
  // A communicator ended. comm_id; a = 1 destroy, 2 abort.
  kCommEnd = 6,
  // A kernel registered (__cudaRegisterFunction). a = host stub address; b = FNV-1a 64 of the
  // device name; c, d = its first 16 bytes (NUL padded).
  kKernelName = 7,
  // Device/host memory allocated or freed (flags 1 = free). a = bytes (0 for a free);
  // b = pointer; c = bytes currently allocated through the wrapped calls.
  kAlloc = 8,
  // Kernel launches on one stream (the poller, at most once a second per stream that launched,
  // and at exit). a = stream handle (0x2, cudaStreamPerThread, for every thread's per-thread
  // default stream; all streams past the table's 63rd share a = UINT64_MAX); b = launches on it
  // since the process started; c = launches since its previous kKernelCount.
  kKernelCount = 9,
  // One sampled kernel (FT_KERNEL_SAMPLE), timed on the GPU with timing-enabled events.
  // a = the kernel: host stub address, or for nvcc's launches the cudaKernel_t handle (see
  // kKernelHandle); b = GPU duration ns; c = stream; d = launch time ns (host).
  kKernelSample = 10,
  // __cudaGetKernel mapped a handle to a host stub: a = cudaKernel_t handle; b = host stub
  // address (its name is in the kKernelName record with that a).
  kKernelHandle = 11,
};

// Record::flags bits for op records.
enum RecordFlags : uint16_t {
  kFlagP2P = 1,          // send/recv: seq is per (comm, peer, direction)
  kFlagGrouped = 2,      // inside ncclGroupStart/End: timed around the outermost ncclGroupEnd
  kFlagCaptured = 4,     // issued while its stream was being captured into a graph: not timed,
                         // no sequence number (it runs at each graph launch)
  kFlagInProgress = 8,   // nonblocking communicator: the call returned ncclInProgress
  kFlagError = 16,       // the op failed (its call or the stream); no start/duration
  kFlagUntimed = 32,     // no events of its own (no runtime, too many in flight): never
                         // reported complete by itself (no kOpEnd); a later event of its
                         // stream may advance the table past it (docs/shm-format.md)
};

// Op kinds: CommSlot::enter_op and the low byte of kOpEnter's a.
enum class OpKind : uint32_t {
  kNone = 0,
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kBroadcast = 4,
  kBcast = 5,
  kReduce = 6,
  kAlltoAll = 7,
  kGather = 8,
  kScatter = 9,
  kSend = 10,
  kRecv = 11,
  kGraphLaunch = 20,  // a CUDA graph launch, timed as a whole (comm_id 0)
};

// Ids in the in-flight table (docs/shm-format.md): splitmix64's finalizer, never 0 (0 marks a
// free slot). A communicator's Send/Recv ops have a slot of their own, whose id libft.so
// claims and the worker maps back to the communicator: P2PSlotId.
inline uint64_t MixId(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}
inline constexpr uint64_t kP2PSlotSalt = 0x7032702d736c6f74ull;  // "p2p-slot"
inline uint64_t P2PSlotId(uint64_t comm_id) { return MixId(comm_id ^ kP2PSlotSalt); }

enum class CommOrigin : uint16_t { kInit = 1, kSplit = 2, kShrink = 3, kInitAll = 4, kUnknown = 5 };
enum class ApiLibrary : uint64_t { kCudart = 1, kNccl = 2 };

const char* OpKindName(OpKind op);

}  // namespace ft::preload

#endif  // FT_PRELOAD_RECORDS_H_

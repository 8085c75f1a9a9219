// The record format: what the ring records (shm::Record, 64 bytes) say, by type, and the op
// kinds of the in-flight table. Part of the segment contract owned by shm/, between libft.so
// (the writer) and its readers (ftworker, ftdump, bench, tests), which may be built at
// different times: documented in docs/shm-format.md (Records). Append new values; never
// renumber.
#ifndef FT_SHM_RECORDS_H_
#define FT_SHM_RECORDS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/hash.h"
#include "shm/layout.h"

namespace ft::shm {

// The record format's version, in SegmentHeader::record_version; separate from the layout
// version, which covers where things are, not what records mean. A new record type, flag or
// op kind is appended without a new version (readers skip what they do not know); changing
// what an existing field means takes a new version. Readers accept every version up to their
// own and refuse newer ones (docs/shm-format.md, Records).
//   1  (the header reads 0: written before the field existed) kApiError's b is the index of
//      the symbol in its .def list, which differs between builds
//   2  kApiError's b is ApiSymbolId of the symbol's name
inline constexpr uint32_t kRecordVersion = 2;

// The record format of a validated header: 0 (a producer that predates the field) reads 1.
constexpr uint32_t RecordVersionOf(const SegmentHeader& header) {
  return header.record_version == 0 ? 1 : header.record_version;
}

// kApiError's symbol id (record version 2): FNV-1a 64 of the symbol's name, e.g. "cudaMalloc".
// A function of the name only, so an id means the same symbol in every build; a reader maps
// it back to the name through the same lists (shm/cudart.def, shm/nccl.def).
constexpr uint64_t ApiSymbolId(std::string_view name) { return Fnv1a64(name); }

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
  // A wrapped call returned an error; the app got it unchanged. a = ApiLibrary; b = the
  // symbol's ApiSymbolId (record version 1: its index in the .def list); c = the returned
  // code; comm_id set for NCCL ops when known.
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
  // The app ended a step: ft_step_done(a) was called at time_ns (host). The worker takes these
  // as the step boundaries instead of inferring them from the ops (docs/shm-format.md).
  kStepDone = 12,
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

// Ids in the in-flight table (docs/shm-format.md): splitmix64's finalizer (common/hash.h),
// never 0 (0 marks a free slot). A communicator's Send/Recv ops have a slot of their own, whose
// id libft.so claims and the worker maps back to the communicator: P2PSlotId.
constexpr uint64_t MixId(uint64_t x) {
  x = Mix64(x);
  return x == 0 ? 1 : x;
}
inline constexpr uint64_t kP2PSlotSalt = 0x7032702d736c6f74ull;  // "p2p-slot"
constexpr uint64_t P2PSlotId(uint64_t comm_id) { return MixId(comm_id ^ kP2PSlotSalt); }

enum class CommOrigin : uint16_t { kInit = 1, kSplit = 2, kShrink = 3, kInitAll = 4, kUnknown = 5 };
enum class ApiLibrary : uint64_t { kCudart = 1, kNccl = 2 };

// The one name of each op kind, as every reader shows it and Redis values carry it
// (docs/redis-schema.md, CommRow.op): "allreduce", "allgather", "reducescatter", "broadcast",
// "bcast", "reduce", "alltoall", "gather", "scatter", "send", "recv", "graphlaunch"; "none"
// for 0 and "op<N>" for a kind this build does not know (a newer libft.so).
std::string OpKindName(uint32_t op_kind);

}  // namespace ft::shm

#endif  // FT_SHM_RECORDS_H_

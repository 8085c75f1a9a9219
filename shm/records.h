// The record format: what the ring records (shm::Record, 64 bytes) say, by type; the op kinds
// are shm/op_kind.h's. Part of the segment contract owned by shm/, between libft.so
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
#include "shm/op_kind.h"

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
  // A communicator this process joined. comm_id; seq 0; a = comm rank | comm size << 32
  // (CommRankWord); b = global rank; c = parent comm id (0 none); d = ordinal on the parent
  // << 32 | u32 color (CommParentWord), flags = CommOrigin.
  kCommInit = 1,
  // An op entered (host time). comm_id, seq (collectives: per comm; p2p: per (comm, peer,
  // direction)); a = OpKind | dtype << 8 | u32 root-or-peer << 32 (0xffffffff none):
  // OpArgsWord; b = bytes (count x element size of the count argument); c = stream; d = count.
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

// The words of records that pack several values, each written by its maker and read by its
// reader only (LevelDB's log_format.h: one writer, one reader of a format): a new field is added
// in one place here, plus docs/shm-format.md.

// An op record's a (kOpEnter, kOpStart, kOpEnd): OpKind | dtype << 8 | u32 root-or-peer << 32.
inline constexpr int32_t kNoPeer = -1;  // written as 0xffffffff
struct OpArgs {
  uint32_t kind = 0;  // an OpKind's value, which this build may not know (OpKindOfRecord)
  uint8_t dtype = 0;  // ncclDataType_t
  int32_t peer = kNoPeer;  // root of a rooted collective or peer of a send/recv (comm rank)
};
constexpr uint64_t OpArgsWord(OpKind kind, uint8_t dtype, int32_t peer) {
  return static_cast<uint64_t>(kind) | (uint64_t{dtype} << 8) | (uint64_t{static_cast<uint32_t>(peer)} << 32);
}
constexpr OpArgs ReadOpArgs(uint64_t a) {
  return OpArgs{static_cast<uint32_t>(a & 0xff), static_cast<uint8_t>(a >> 8),
                static_cast<int32_t>(static_cast<uint32_t>(a >> 32))};
}

// kCommInit's a: comm rank | comm size << 32.
struct CommRank {
  int32_t comm_rank = 0;
  int32_t comm_size = 0;
};
constexpr uint64_t CommRankWord(int32_t comm_rank, int32_t comm_size) {
  return uint64_t{static_cast<uint32_t>(comm_rank)} | (uint64_t{static_cast<uint32_t>(comm_size)} << 32);
}
constexpr CommRank ReadCommRank(uint64_t a) {
  return CommRank{static_cast<int32_t>(static_cast<uint32_t>(a)), static_cast<int32_t>(static_cast<uint32_t>(a >> 32))};
}

// kCommInit's d: the ordinal of this split or shrink on the parent << 32 | u32 color.
struct CommParent {
  uint32_t ordinal = 0;
  int32_t color = 0;
};
constexpr uint64_t CommParentWord(uint32_t ordinal, int32_t color) {
  return (uint64_t{ordinal} << 32) | static_cast<uint32_t>(color);
}
constexpr CommParent ReadCommParent(uint64_t d) {
  return CommParent{static_cast<uint32_t>(d >> 32), static_cast<int32_t>(static_cast<uint32_t>(d))};
}

}  // namespace ft::shm

#endif  // FT_SHM_RECORDS_H_

// Operations and their execution on streams.
//
// An API call validates on the calling thread and produces an OpArgs. Outside a group it is
// submitted at once; inside, at the outermost ncclGroupEnd. Submission makes one Task per
// stream holding that stream's ops and enqueues one host function (RunTask) with
// cudaLaunchHostFunc. The task runs on the stream's worker thread and progresses all its ops
// together: each op is a non-blocking state machine; RunTask polls them round-robin and, when
// none can move, spins briefly and then sleeps on the communicator's doorbell (futex). A
// missing peer therefore blocks the stream, never the calling thread.
//
// Collectives of one communicator run one at a time in the order they begin executing (the
// k-th collective of every member is the same one); each gets its sequence number when it
// begins. Point-to-point messages are matched in order per (sender, receiver) pair.
#ifndef GPUSIM_NCCL_OPS_H_
#define GPUSIM_NCCL_OPS_H_

#include <nccl.h>

#include <memory>
#include <vector>

#include "comm.h"
#include "reduce.h"

namespace gpusim::nccl {

enum class OpKind : uint8_t {
  kAllReduce,
  kReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSend,
  kRecv,
};
const char* OpName(OpKind k);

struct OpArgs {
  OpKind kind = OpKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // AllGather: sendcount; ReduceScatter: recvcount; others: per rank
  ncclDataType_t type = ncclFloat32;
  RedOpSpec red;
  int root = 0;  // root, or the peer of Send/Recv
  std::shared_ptr<CommCore> comm;
  cudaStream_t stream = nullptr;
};

// Submits ops (in call order) to their streams: one host function per stream. Returns
// ncclInProgress if any op's communicator is nonblocking (the host functions are then
// enqueued by a background thread shortly after), ncclSystemError if the CUDA runtime cannot
// be loaded, ncclUnhandledCudaError if cudaLaunchHostFunc fails.
ncclResult_t Submit(std::vector<OpArgs>&& ops);

// Runs fn on the process's background launcher thread (FIFO).
void RunOnLauncher(std::function<void()> fn);

}  // namespace gpusim::nccl

#endif  // GPUSIM_NCCL_OPS_H_

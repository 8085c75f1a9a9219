// ncclGroupStart/End: per-thread nesting; calls inside a group are queued and submitted at the
// outermost ncclGroupEnd. Communicator creation inside a group (InitRank, Split, ...) is
// deferred as a CommJob and run at the outermost end, concurrently per chain so one thread can
// create several members of one communicator.
#ifndef GPUSIM_NCCL_GROUP_H_
#define GPUSIM_NCCL_GROUP_H_

#include <nccl.h>

#include <functional>

#include "ops.h"

namespace gpusim::nccl {

struct CommJob {
  const void* chain = nullptr;  // jobs of one chain run in call order on one thread
  bool blocking = true;         // false: the caller returns ncclInProgress, the job runs behind
  std::function<ncclResult_t()> run;
  std::function<void(ncclResult_t)> drop;  // called instead of run when the group fails
};

bool InGroup();
// Queues (in a group) or submits now. Returns what the API call should return.
ncclResult_t EnqueueOp(OpArgs&& op);
// Runs now (blocking), on a background thread (nonblocking), or at the group's end.
ncclResult_t EnqueueCommJob(CommJob&& job);
// An argument error inside a group: the group's end returns it and drops its work.
ncclResult_t GroupFail(ncclResult_t r);

ncclResult_t GroupStart();
ncclResult_t GroupEnd();
ncclResult_t GroupSimulateEnd(ncclSimInfo_t* info);

}  // namespace gpusim::nccl

#endif  // GPUSIM_NCCL_GROUP_H_

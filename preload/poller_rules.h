// libft.so internal: what the poller thread may do under CUDA's and NCCL's rules, so that its
// calls never change what the app's own calls do.
//  - CUDA stream capture: while any thread captures a graph in global mode (torch.cuda.graph's
//    default), a "potentially unsafe" call (cudaEventQuery, ...) from a thread in global mode
//    fails and invalidates that capture. The poller switches itself to relaxed mode
//    (cudaThreadExchangeStreamCaptureMode is per thread), and never records an event into a
//    stream being captured (the record would become a node of the app's graph).
//  - NCCL abort/destroy: no other thread may be inside NCCL on a communicator being aborted,
//    and the handle is invalid once destroyed. The app thread marks the comm ended and waits
//    for the poller to leave it before the real call (NcclEndCommPre); the poller enters a comm
//    only through PollAsyncError, which checks the mark.
// Poller thread only, except where noted.
#ifndef FT_PRELOAD_POLLER_RULES_H_
#define FT_PRELOAD_POLLER_RULES_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "preload/runtime_state.h"

namespace ft::preload::internal {

// Puts the calling thread in relaxed capture mode. False when the runtime is not loaded yet
// (try again later). Call after the thread's device is set: the poller must not create a
// context on a device the app does not use.
bool RelaxCaptureMode();

// ncclCommGetAsyncError on `handle`, unless its end began. True with *state set when called and
// it returned ncclSuccess.
bool PollAsyncError(CommInfo* info, ncclComm_t handle, ncclResult_t* state);

// App thread, inside ncclCommDestroy/ncclCommAbort's hook before the real call: marks `info`
// ended and returns once the poller is not inside it (it never enters it again).
void EndAndWaitForPoller(CommInfo* info);

// Whether an event may be recorded into `stream` now: false while it is being captured (or
// when the runtime cannot say). Another thread could begin a capture right after this answers;
// the window is a few instructions, the alternative (not timing late ends) loses evidence.
bool MayRecordInto(cudaStream_t stream);

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_POLLER_RULES_H_

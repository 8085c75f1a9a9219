// libft.so internal: kernel launches. Every launch is counted on its stream (app threads: one
// relaxed add, after the first launch of a thread on a stream found its slot); every
// FT_KERNEL_SAMPLE-th launch of a thread is timed on the GPU with a pair of timing-enabled
// events that the poller reads. Off by default: a duration per kernel is not what hang or
// straggler detection needs (they use the collectives), and timing events are the costly kind.
#ifndef FT_PRELOAD_KERNEL_LAUNCH_H_
#define FT_PRELOAD_KERNEL_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <vector>

#include "preload/runtime_state.h"
#include "shm/ring.h"

namespace ft::preload::internal {

// The stream a launch runs on: a _ptsz entry's stream 0 is the calling thread's per-thread
// default stream, which other runtime calls name cudaStreamPerThread.
inline cudaStream_t LaunchStream(cudaStream_t stream, bool per_thread) {
  return per_thread && stream == nullptr ? cudaStreamPerThread : stream;
}

// App threads. Counts the launch; returns a sample in progress (its start event recorded) when
// this launch is sampled, else nullptr.
Pending* KernelLaunchPre(const void* kernel, cudaStream_t stream) noexcept;
// Records the sample's end event and hands it to the poller (or drops it when the launch
// failed).
void KernelLaunchPost(Pending* sample, cudaError_t result) noexcept;

// The poller. True when the sample is finished with (its kKernelSample appended to *out when
// the GPU timed it) and handed back.
bool StepKernelSample(Pending* p, uint64_t now, std::vector<shm::Record>* out);
// kKernelCount records for the streams that launched since the last call.
void ReportLaunchCounts(uint64_t now, std::vector<shm::Record>* out);

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_KERNEL_LAUNCH_H_

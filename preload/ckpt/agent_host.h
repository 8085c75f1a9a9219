// libft.so internal: what the checkpoint agent uses of the hook runtime, and all it may use of
// it. The agent owns this interface; the runtime implements it (preload/agent_host.cc), so the
// agent includes nothing of preload/ outside its own folder and the runtime is the one side that
// reaches across (cmake/layers.txt holds both to it). The runtime sees the agent through
// ckpt_agent.h alone (the poller hands it save commands, the termination signal asks it for a
// save).
//
// Every function is safe to call at any time from any thread, before the runtime started and
// after it stopped (Started() says which): none allocates, none throws.
#ifndef FT_PRELOAD_CKPT_AGENT_HOST_H_
#define FT_PRELOAD_CKPT_AGENT_HOST_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/launcher_identity.h"
#include "common/status.h"
#include "shm/segment.h"

namespace ft::preload::host {

// The devices a process can use, as the runtime counts them.
inline constexpr int kMaxDevices = 64;

// The runtime of this process: whether it started (and has not stopped); its configuration,
// the launcher's identity and the pid of the process that started it (a forked child is not
// it) — those three only while Started(). Segment(): the process's shm segment, or nullptr.
bool Started();
// Whether libft.so is active, initializing it at the first call (false: FT_ENABLE=0, no
// segment, a forked child, exit began).
bool Active();
const Config& RuntimeConfig();
const LauncherIdentity& Identity();
int OwnerPid();
shm::Segment* Segment();
// CLOCK_MONOTONIC in ns, the clock of the segment's records.
uint64_t NowNs();
// The step boundary the worker reads (a kStepDone record, stamped now), in the calling
// thread's record stream.
void RecordStepDone(int64_t step);

// ft's own CUDA calls are never intercepted (nor timed) again. InFt: the calling thread is
// inside libft.so. FtScope: for its lifetime, the calling app thread is. MarkFtThread: the
// calling thread (one of the agent's own) is, for good.
bool InFt();
void MarkFtThread();
class FtScope {
 public:
  FtScope();
  ~FtScope();
  FtScope(const FtScope&) = delete;
  FtScope& operator=(const FtScope&) = delete;
};

// CUDA's stream-capture rules. MayRecordInto: an event may be recorded into `stream` now (false
// while it is captured, or when the runtime cannot say). RelaxCaptureMode: the calling thread
// in relaxed capture mode (false when the CUDA runtime is not loaded yet: try again later).
bool MayRecordInto(cudaStream_t stream);
bool RelaxCaptureMode();

// The termination signals (FT_CKPT_ON_SIGNAL, armed when libft.so becomes active): parsed,
// blocked on the agent's threads; at exit, a save in progress waited for and the signal's
// default action taken; at each step done, a handled signal's mark cleared once the rank
// trains on (preload/term_signal.h).
Status ParseTerminationSignals(std::string_view text, std::vector<int>* out);
void BlockTerminationSignals() noexcept;
void FinishTerminationAtExit() noexcept;
void NoteStepDone() noexcept;

// Whether the program's main has returned (preload/main_return.h): true only where libft.so saw
// main called and return; false while it runs, and where the entry did not come through
// libft.so (loaded by dlopen, a static binary), as before anyone could tell.
bool MainReturned() noexcept;

// The real CUDA runtime functions the agent calls, never ft's wrappers: FT_HOST_CUDA(name) is
// the real `name`, or nullptr while no loaded library provides it (the runtime resolves each at
// its first use, so a libcudart loaded after libft.so is found).
#define FT_AGENT_CUDA_FUNCTIONS(X)                                                                 \
  X(cudaDeviceSynchronize) X(cudaEventCreateWithFlags) X(cudaEventDestroy) X(cudaEventQuery)       \
  X(cudaEventRecord) X(cudaGetDevice) X(cudaGetLastError)                                          \
  X(cudaHostRegister) X(cudaMemcpyAsync) X(cudaPeekAtLastError) X(cudaPointerGetAttributes)        \
  X(cudaSetDevice) X(cudaStreamCreateWithFlags) X(cudaStreamSynchronize) X(cudaStreamWaitEvent)    \
  X(cudaThreadExchangeStreamCaptureMode)

enum class CudaFunction {
#define FT_AGENT_CUDA_ENUM(name) k_##name,
  FT_AGENT_CUDA_FUNCTIONS(FT_AGENT_CUDA_ENUM)
#undef FT_AGENT_CUDA_ENUM
};
void* RealCuda(CudaFunction function);
#define FT_HOST_CUDA(name)                         \
  reinterpret_cast<decltype(&::name)>(::ft::preload::host::RealCuda( \
      ::ft::preload::host::CudaFunction::k_##name))

// CUDA calls the agent makes on an app thread must not change what the app's
// cudaGetLastError() returns: Check clears an error of ours when the app had none pending when
// this was made (the runtime's own rule, preload/timing.h).
class AppCuda {
 public:
  AppCuda();
  cudaError_t Check(cudaError_t e);

 private:
  bool had_prior_ = false;
};

}  // namespace ft::preload::host

#endif  // FT_PRELOAD_CKPT_AGENT_HOST_H_

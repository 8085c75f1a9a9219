// The hook runtime's side of the checkpoint agent's interface (preload/ckpt/agent_host.h): each
// function forwards to the runtime's own, so the agent sees the runtime only through it.
#include "preload/ckpt/agent_host.h"

#include "preload/main_return.h"
#include "preload/poller_rules.h"
#include "preload/real.h"
#include "preload/runtime.h"
#include "preload/runtime_state.h"
#include "preload/term_signal.h"
#include "preload/timing.h"

namespace ft::preload::host {

static_assert(kMaxDevices == internal::kMaxDevices, "the agent and the runtime count devices alike");

// g_rt is set once by the runtime's Init and never freed.
bool Started() { return internal::g_rt != nullptr; }
const Config& RuntimeConfig() { return internal::g_rt->config; }
const LauncherIdentity& Identity() { return internal::g_rt->identity; }
int OwnerPid() { return internal::g_rt->owner_pid; }
shm::Segment* Segment() { return internal::g_rt != nullptr ? internal::g_rt->segment.get() : nullptr; }
uint64_t NowNs() { return internal::NowNs(); }

bool Active() {
  const int state = g_state.load(std::memory_order_acquire);
  return state == kActive || (state == kUninit && InitSlow());
}

void RecordStepDone(int64_t step) {
  shm::Record mark = internal::MakeRecord(shm::RecordType::kStepDone, 0, internal::kNoSlot, 0, 0, internal::NowNs());
  mark.a = static_cast<uint64_t>(step);
  internal::Push(mark);
}

bool InFt() { return t_in_ft; }
void MarkFtThread() { t_in_ft = true; }
FtScope::FtScope() { t_in_ft = true; }
FtScope::~FtScope() { t_in_ft = false; }

bool MayRecordInto(cudaStream_t stream) { return internal::MayRecordInto(stream); }
bool RelaxCaptureMode() { return internal::RelaxCaptureMode(); }

Status ParseTerminationSignals(std::string_view text, std::vector<int>* out) { return term::ParseSignals(text, out); }
void BlockTerminationSignals() noexcept { term::BlockTerminationSignals(); }
void FinishTerminationAtExit() noexcept { term::FinishAtExit(); }
void NoteStepDone() noexcept { term::NoteStepDone(); }
bool MainReturned() noexcept { return ProgramMain() == MainState::kReturned; }

void* RealCuda(CudaFunction function) {
  switch (function) {
#define FT_AGENT_CUDA_CASE(name) \
  case CudaFunction::k_##name:   \
    return ::ft::preload::RealCuda(CudaSym::k_##name);
    FT_AGENT_CUDA_FUNCTIONS(FT_AGENT_CUDA_CASE)
#undef FT_AGENT_CUDA_CASE
  }
  return nullptr;
}

AppCuda::AppCuda() : had_prior_(internal::AppCuda::AppErrorPending()) {}
cudaError_t AppCuda::Check(cudaError_t e) { return internal::AppCuda::ClearOurs(e, had_prior_); }

}  // namespace ft::preload::host

#include "preload/kernel_launch.h"

#include "preload/hook_failures.h"
#include "preload/real.h"
#include "preload/timing.h"

namespace ft::preload::internal {

namespace {

// The slot of the stream this thread launched on last: a thread feeding one stream finds it
// without probing. constinit: no TLS init wrapper (see t_group_depth).
constinit thread_local uintptr_t t_last_key = 0;
constinit thread_local StreamLaunchCount* t_last_slot = nullptr;
// Launches of this thread until its next sample.
constinit thread_local uint64_t t_until_sample = 0;

StreamLaunchCount* SlotOf(uintptr_t key) {
  // Open addressing over the first kStreamSlots - 1 slots; the last takes what does not fit.
  constexpr size_t kProbed = kStreamSlots - 1;
  size_t start = (key * 0x9e3779b97f4a7c15ull) >> 58;  // top 6 bits: 0..63
  for (size_t i = 0; i < kProbed; ++i) {
    StreamLaunchCount& slot = g_rt->stream_launches[(start + i) % kProbed];
    uintptr_t seen = slot.key.load(std::memory_order_acquire);
    if (seen == key) return &slot;
    if (seen == 0 && slot.key.compare_exchange_strong(seen, key, std::memory_order_acq_rel)) return &slot;
    if (seen == key) return &slot;  // claimed by another thread for the same stream meanwhile
  }
  StreamLaunchCount& overflow = g_rt->stream_launches[kProbed];
  uintptr_t none = 0;
  overflow.key.compare_exchange_strong(none, UINTPTR_MAX, std::memory_order_acq_rel);
  return &overflow;
}

void CountLaunch(cudaStream_t stream) {
  uintptr_t key = reinterpret_cast<uintptr_t>(stream) + 1;
  if (key != t_last_key || t_last_slot == nullptr) {
    t_last_slot = SlotOf(key);
    t_last_key = key;
  }
  t_last_slot->launches.fetch_add(1, std::memory_order_relaxed);
}

Pending* BeginSample(const void* kernel, cudaStream_t stream) {
  if (g_rt->submitted.load(std::memory_order_relaxed) -
          g_rt->finished.load(std::memory_order_relaxed) >= kMaxPending) {
    return nullptr;
  }
  auto record = FT_REAL_CUDA(cudaEventRecord);
  if (record == nullptr) return nullptr;
  AppCuda cuda;
  if (StreamCapturing(stream, cuda) != Capture::kNo) return nullptr;  // never into a graph
  int device = CurrentDevice(cuda);
  if (device < 0 || device >= kMaxDevices) return nullptr;
  cudaEvent_t start = AcquireEvent(device, &cuda, EventKind::kTiming);
  cudaEvent_t end = AcquireEvent(device, &cuda, EventKind::kTiming);
  if (start == nullptr || end == nullptr || cuda.Check(record(start, stream)) != cudaSuccess) {
    ReleaseEvent(device, start, &cuda, EventKind::kTiming);
    ReleaseEvent(device, end, &cuda, EventKind::kTiming);
    return nullptr;
  }
  Pending* p = NewPending();
  p->kernel_sample = true;
  p->device = device;
  p->stream = stream;
  p->kernel = kernel;
  p->launched_ns = NowNs();
  p->timed_start = start;
  p->timed_end = end;
  return p;
}

// Back to the pools and the free list (app thread: cuda set; poller: nullptr).
void EndSample(Pending* p, AppCuda* cuda) {
  ReleaseEvent(p->device, p->timed_start, cuda, EventKind::kTiming);
  ReleaseEvent(p->device, p->timed_end, cuda, EventKind::kTiming);
  p->timed_start = p->timed_end = nullptr;
  p->kernel_sample = false;
  FreePending(p);
}

}  // namespace

Pending* KernelLaunchPre(const void* kernel, cudaStream_t stream) noexcept {
  if (g_rt == nullptr) return nullptr;
  CountLaunch(stream);
  if (g_rt->kernel_sample == 0) return nullptr;
  if (t_until_sample > 1) {
    --t_until_sample;
    return nullptr;
  }
  t_until_sample = g_rt->kernel_sample;
  try {
    MaybeFail(shm::HookPlace::kKernelLaunchPre);
    return BeginSample(kernel, stream);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kKernelLaunchPre);
    return nullptr;
  }
}

void KernelLaunchPost(Pending* p, cudaError_t result) noexcept {
  if (p == nullptr) return;
  try {
    MaybeFail(shm::HookPlace::kKernelLaunchPost);
    AppCuda cuda;
    auto record = FT_REAL_CUDA(cudaEventRecord);
    if (result != cudaSuccess || record == nullptr ||
        cuda.Check(record(p->timed_end, p->stream)) != cudaSuccess) {
      EndSample(p, &cuda);  // the start event may still be pending: the pool reuses it later
      return;
    }
    Submit(p, false, cuda);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kKernelLaunchPost);
  }
}

bool StepKernelSample(Pending* p, uint64_t now, std::vector<shm::Record>* out) {
  auto query = FT_REAL_CUDA(cudaEventQuery);
  auto elapsed = FT_REAL_CUDA(cudaEventElapsedTime);
  cudaError_t q = query != nullptr ? query(p->timed_end) : cudaErrorUnknown;
  if (q == cudaErrorNotReady) return false;
  float ms = 0;
  if (q == cudaSuccess && elapsed != nullptr &&
      elapsed(&ms, p->timed_start, p->timed_end) == cudaSuccess && ms >= 0) {
    auto r = MakeRecord(RecordType::kKernelSample, 0, kNoSlot, 0, 0, now);
    r.a = reinterpret_cast<uintptr_t>(p->kernel);
    r.b = static_cast<uint64_t>(static_cast<double>(ms) * 1e6);
    r.c = reinterpret_cast<uintptr_t>(p->stream);
    r.d = p->launched_ns;
    out->push_back(r);
  }
  EndSample(p, nullptr);
  return true;
}

void ReportLaunchCounts(uint64_t now, std::vector<shm::Record>* out) {
  for (StreamLaunchCount& slot : g_rt->stream_launches) {
    uintptr_t key = slot.key.load(std::memory_order_acquire);
    if (key == 0) continue;
    uint64_t total = slot.launches.load(std::memory_order_relaxed);
    if (total == slot.reported) continue;
    auto r = MakeRecord(RecordType::kKernelCount, 0, kNoSlot, 0, 0, now);
    r.a = key == UINTPTR_MAX ? UINT64_MAX : static_cast<uint64_t>(key - 1);
    r.b = total;
    r.c = total - slot.reported;
    slot.reported = total;
    out->push_back(r);
  }
}

}  // namespace ft::preload::internal

// Events. A record takes a new generation at enqueue time; the stream's worker marks it
// reached (with the host monotonic time) when it gets there. cudaEventQuery compares the two
// without a lock, so pollers (the ft interposer) never wait on a stream.
#include <unordered_set>

#include "runtime.h"

namespace gpusim {
namespace {

// Every live event, so a forked child can rebuild their mutexes. Leaked on purpose: workers
// may still touch events while static destructors run at exit.
std::mutex& RegistryMu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::unordered_set<CUevent_st*>& Registry() {
  static auto* set = new std::unordered_set<CUevent_st*>;
  return *set;
}

CUevent_st* AsEvent(cudaEvent_t e) {
  auto* ev = reinterpret_cast<CUevent_st*>(e);
  return ev && ev->magic.load(std::memory_order_relaxed) == CUevent_st::kMagic ? ev : nullptr;
}

bool Reached(const CUevent_st* ev) {
  return ev->reached_gen.load(std::memory_order_acquire) >=
         ev->record_gen.load(std::memory_order_acquire);
}

}  // namespace
}  // namespace gpusim

void CUevent_st::Release(CUevent_st* e) {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  {
    std::lock_guard<std::mutex> lk(gpusim::RegistryMu());
    gpusim::Registry().erase(e);
  }
  delete e;
}

namespace gpusim {

bool ValidEvent(cudaEvent_t e) { return AsEvent(e) != nullptr; }

uint64_t NewRecordGeneration(CUevent_st* ev) {
  std::lock_guard<std::mutex> lk(ev->mu);
  ev->captured_in.store(0, std::memory_order_relaxed);
  return ev->record_gen.fetch_add(1, std::memory_order_acq_rel) + 1;
}

uint64_t CurrentRecordGeneration(CUevent_st* ev) {
  return ev->record_gen.load(std::memory_order_acquire);
}

void ReachEvent(CUevent_st* ev, uint64_t gen) {
  int64_t now = NowNs();
  std::lock_guard<std::mutex> lk(ev->mu);
  if (gen == 0) gen = ev->record_gen.fetch_add(1, std::memory_order_acq_rel) + 1;
  // A re-recorded event refers to its newest record: an older record reached late changes
  // nothing.
  if (gen > ev->reached_gen.load(std::memory_order_relaxed)) {
    ev->reached_ns = now;
    ev->reached_gen.store(gen, std::memory_order_release);
    if (ev->waiters) ev->cv.notify_all();
  }
}

namespace {

// The driver's rule (cudaEventSynchronize): a thread waiting for an event made without
// cudaEventBlockingSync busy-waits, unless the device was told to block
// (cudaDeviceScheduleBlockingSync); under the default schedule it spins as long as the process
// has no more contexts than the host has cores. Modelled only with GPUSIM_SPIN_WAITS=1: on a
// 2-core test machine every rank spinning on its steps would starve the rest, so by default
// every wait blocks. A test that checks what a wait costs the CPU sets it.
bool SpinsOnSynchronize(const CUevent_st* ev) {
  if (!GetConfig().spin_waits || (ev->flags & cudaEventBlockingSync)) return false;
  const unsigned schedule = GetDevice(CurrentDevice()).flags.load(std::memory_order_relaxed) & cudaDeviceScheduleMask;
  return schedule != cudaDeviceScheduleBlockingSync;
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void WaitEventReached(CUevent_st* ev, uint64_t gen) {
  if (ev->reached_gen.load(std::memory_order_acquire) >= gen) return;
  std::unique_lock<std::mutex> lk(ev->mu);
  ++ev->waiters;
  ev->cv.wait(lk, [&] { return ev->reached_gen.load(std::memory_order_acquire) >= gen; });
  --ev->waiters;
}

void MarkEventCaptured(CUevent_st* ev, unsigned long long capture_id) {
  ev->captured_in.store(capture_id, std::memory_order_release);
}

unsigned long long EventCaptureId(CUevent_st* ev) {
  return ev->captured_in.load(std::memory_order_acquire);
}

void LockEventsForFork() { RegistryMu().lock(); }
void UnlockEventsForFork() { RegistryMu().unlock(); }

void ResetEventsAfterFork() {
  // Records pending in the parent's streams will never run in the child: count them reached
  // so nothing in the child waits for them.
  for (CUevent_st* ev : Registry()) {
    new (&ev->mu) std::mutex;
    new (&ev->cv) std::condition_variable;
    ev->waiters = 0;
    ev->reached_gen.store(ev->record_gen.load());
  }
}

namespace api {

cudaError_t EventRecord(cudaEvent_t e, cudaStream_t h, unsigned flags, bool pt) {
  CUevent_st* ev = AsEvent(e);
  CUstream_st* s = ResolveStream(h, pt);
  if (!ev || !s) return Ret(cudaErrorInvalidResourceHandle);
  if (flags & ~static_cast<unsigned>(cudaEventRecordExternal)) return Ret(cudaErrorInvalidValue);
  if (s->capturing.load(std::memory_order_acquire)) {
    unsigned long long id;
    {
      std::lock_guard<std::mutex> lk(s->mu);
      id = s->capture_id;
    }
    cudaError_t err = Enqueue(s, EventRecordOp{Ref<CUevent_st>(ev), 0});
    if (err == cudaSuccess) MarkEventCaptured(ev, id);
    return Ret(err);
  }
  uint64_t gen = NewRecordGeneration(ev);
  cudaError_t err = Enqueue(s, EventRecordOp{Ref<CUevent_st>(ev), gen});
  // A record that could not be queued must not leave the event "not ready" for ever.
  if (err != cudaSuccess) ReachEvent(ev, gen);
  return Ret(err);
}

cudaError_t StreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned flags, bool pt) {
  CUevent_st* ev = AsEvent(e);
  CUstream_st* s = ResolveStream(h, pt);
  if (!ev || !s) return Ret(cudaErrorInvalidResourceHandle);
  if (flags & ~static_cast<unsigned>(cudaEventWaitExternal)) return Ret(cudaErrorInvalidValue);
  if (s->capturing.load(std::memory_order_acquire))
    return Ret(Enqueue(s, EventWaitOp{Ref<CUevent_st>(ev), 0}));
  // Joining another stream into a capture through an event (cross-stream capture) is not
  // simulated.
  if (EventCaptureId(ev) != 0) return Ret(cudaErrorStreamCaptureUnsupported);
  uint64_t gen = CurrentRecordGeneration(ev);
  // Never recorded, or already reached: nothing to wait for.
  if (gen == 0 || ev->reached_gen.load(std::memory_order_acquire) >= gen) return cudaSuccess;
  return Ret(Enqueue(s, EventWaitOp{Ref<CUevent_st>(ev), gen}));
}

}  // namespace api
}  // namespace gpusim

using namespace gpusim;

GPUSIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  if (!e) return Ret(cudaErrorInvalidValue);
  constexpr unsigned kKnown = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (flags & ~kKnown) return Ret(cudaErrorInvalidValue);
  // No IPC in the simulation: an interprocess event would need a handle another process can
  // open.
  if (flags & cudaEventInterprocess) return Ret(cudaErrorNotSupported);
  auto* ev = new CUevent_st(flags);
  {
    std::lock_guard<std::mutex> lk(RegistryMu());
    Registry().insert(ev);
  }
  *e = ev;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventCreate(cudaEvent_t* e) {
  return cudaEventCreateWithFlags(e, cudaEventDefault);
}

GPUSIM_API cudaError_t cudaEventDestroy(cudaEvent_t e) {
  CUevent_st* ev = AsEvent(e);
  uint32_t magic = CUevent_st::kMagic;
  if (!ev || !ev->magic.compare_exchange_strong(magic, 0))
    return Ret(cudaErrorInvalidResourceHandle);
  // Pending records keep the event alive until they have run.
  CUevent_st::Release(ev);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventQuery(cudaEvent_t e) {
  CUevent_st* ev = AsEvent(e);
  if (!ev) return Ret(cudaErrorInvalidResourceHandle);
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  if (EventCaptureId(ev) != 0) return Ret(cudaErrorCapturedEvent);
  return Reached(ev) ? cudaSuccess : cudaErrorNotReady;
}

GPUSIM_API cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  CUevent_st* ev = AsEvent(e);
  if (!ev) return Ret(cudaErrorInvalidResourceHandle);
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  if (EventCaptureId(ev) != 0) return Ret(cudaErrorCapturedEvent);
  if (CurrentWorkerStream()) return Ret(cudaErrorNotPermitted);  // see SyncStream
  const uint64_t gen = ev->record_gen.load(std::memory_order_acquire);
  if (SpinsOnSynchronize(ev)) {
    while (ev->reached_gen.load(std::memory_order_acquire) < gen) CpuRelax();
    return cudaSuccess;
  }
  WaitEventReached(ev, gen);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  CUevent_st* a = AsEvent(start);
  CUevent_st* b = AsEvent(end);
  if (!ms) return Ret(cudaErrorInvalidValue);
  if (!a || !b) return Ret(cudaErrorInvalidResourceHandle);
  if ((a->flags | b->flags) & cudaEventDisableTiming) return Ret(cudaErrorInvalidResourceHandle);
  if (EventCaptureId(a) != 0 || EventCaptureId(b) != 0) return Ret(cudaErrorCapturedEvent);
  if (a->record_gen.load() == 0 || b->record_gen.load() == 0)
    return Ret(cudaErrorInvalidResourceHandle);
  if (!Reached(a) || !Reached(b)) return cudaErrorNotReady;
  int64_t t0, t1;
  {
    std::lock_guard<std::mutex> lk(a->mu);
    t0 = a->reached_ns;
  }
  {
    std::lock_guard<std::mutex> lk(b->mu);
    t1 = b->reached_ns;
  }
  *ms = static_cast<float>(static_cast<double>(t1 - t0) / 1e6);
  return cudaSuccess;
}

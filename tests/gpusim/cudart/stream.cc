// Streams: one worker thread per stream runs its Ops in order. Also the legacy default
// stream's implicit synchronisation, the per-thread default stream, synchronisation, the
// stream API, and the fork handlers (streams are the state a fork breaks).
#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "runtime.h"

namespace gpusim {
namespace {

std::atomic<unsigned long long> g_next_stream_id{1};
thread_local CUstream_st* t_worker_stream = nullptr;

// A thread's per-thread default streams, destroyed (pending work still runs) when it exits.
struct PerThreadStreams {
  CUstream_st* s[kMaxDevices] = {};
  ~PerThreadStreams();
};
thread_local PerThreadStreams t_pts;

CUstream_st* NewStreamLocked(Device& d, int device, unsigned flags, int priority, bool legacy,
                             bool per_thread) {
  auto* s = new CUstream_st(device, flags, priority, legacy, per_thread,
                            g_next_stream_id.fetch_add(1, std::memory_order_relaxed));
  d.streams.push_back(s);
  if (legacy) d.legacy.store(s, std::memory_order_release);
  return s;
}

CUstream_st* NewStream(int device, unsigned flags, int priority, bool per_thread) {
  Device& d = GetDevice(device);
  std::lock_guard<std::mutex> lk(d.mu);
  return NewStreamLocked(d, device, flags, priority, false, per_thread);
}

// Removes s from its device once no new work can reach it (destroyed and drained).
void Retire(CUstream_st* s) {
  Device& d = GetDevice(s->device);
  std::lock_guard<std::mutex> lk(d.mu);
  if (s->retired) return;
  s->retired = true;
  d.streams.erase(std::remove(d.streams.begin(), d.streams.end(), s), d.streams.end());
}

// A GPU's kernels and collectives go on while its process waits for a CPU; a stream worker is
// a host thread, and on a starved process's CPU share it held a simulated collective for seconds
// after its peers had finished it (ft then names that rank's GPU stuck, as it should for a real
// one). GPUSIM_DEVICE_CPU_GROUP names a cgroup v1 `tasks` file: each worker moves itself there,
// the simulated devices' own CPU share (scripts/low-cpu-share.sh sets it). Unset: the worker
// stays with its process. A file it cannot write is said once.
void JoinDeviceCpuGroup() {
  static const char* const path = getenv("GPUSIM_DEVICE_CPU_GROUP");
  if (path == nullptr || *path == '\0') return;
  char tid[24];
  const int n = snprintf(tid, sizeof tid, "%ld\n", static_cast<long>(syscall(SYS_gettid)));
  const int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);  // appends, as `echo >>` does
  const bool moved = fd >= 0 && write(fd, tid, static_cast<size_t>(n)) == n;
  const int err = errno;
  if (fd >= 0) close(fd);
  static std::atomic<bool> said{false};
  if (!moved && !said.exchange(true)) {
    Warn("GPUSIM_DEVICE_CPU_GROUP=%s: cannot move a stream worker there (%s); it runs on its "
         "process's CPU share", path, strerror(err));
  }
}

void WorkerMain(CUstream_st* s) {
  // Short kernels sleep a few microseconds; the default 50 us timer slack would stretch them.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  char name[16];
  snprintf(name, sizeof name, "gpusim-s%llu", s->id);
  pthread_setname_np(pthread_self(), name);
  JoinDeviceCpuGroup();
  t_worker_stream = s;

  std::unique_lock<std::mutex> lk(s->mu);
  for (;;) {
    while (s->queue.empty()) {
      if (s->destroyed) {
        s->worker_running = false;
        lk.unlock();
        Retire(s);
        CUstream_st::Release(s);
        return;
      }
      s->worker_idle = true;
      s->work_cv.wait(lk);
      s->worker_idle = false;
    }
    {
      Op op = std::move(s->queue.front());
      s->queue.pop_front();
      lk.unlock();
      // No lock is held while the Op runs: it may block for ever (a hung collective).
      Execute(s, op, nullptr);
    }  // the Op's references are dropped before relocking
    lk.lock();
    s->completed.fetch_add(1, std::memory_order_release);
    if (s->done_waiters) s->done_cv.notify_all();
  }
}

// Appends op to s->queue (s->mu held). Returns whether the idle worker must be woken.
bool PushLocked(CUstream_st* s, Op&& op) {
  s->queue.push_back(std::move(op));
  s->enqueued.fetch_add(1, std::memory_order_release);
  if (s->worker_running) return s->worker_idle;
  // Workers start lazily: streams that never get work cost no thread, and a forked child
  // recreates them on its first enqueue.
  s->worker_running = true;
  s->refs.fetch_add(1, std::memory_order_relaxed);
  try {
    std::thread(WorkerMain, s).detach();
  } catch (const std::exception& e) {
    s->worker_running = false;
    s->refs.fetch_sub(1, std::memory_order_relaxed);
    Warn("cannot start a stream worker thread (%s); work on this stream will not run", e.what());
  }
  return false;
}

struct Mark {
  Ref<CUstream_st> s;
  uint64_t target;
};

// Every stream of `device` with unfinished work: what cudaDeviceSynchronize waits for.
// blocking_only: the legacy stream's view (non-blocking streams are not waited for).
std::vector<Mark> PendingMarks(int device, bool blocking_only) {
  std::vector<Mark> marks;
  Device& d = GetDevice(device);
  std::lock_guard<std::mutex> lk(d.mu);
  for (CUstream_st* b : d.streams) {
    if (blocking_only && !b->blocking()) continue;
    uint64_t n = b->enqueued.load(std::memory_order_acquire);
    if (b->completed.load(std::memory_order_acquire) < n) marks.push_back({Ref<CUstream_st>(b), n});
  }
  return marks;
}

// Whether any blocking stream of `device` has unfinished work (a legacy-stream query).
bool BlockingWorkPending(int device) {
  Device& d = GetDevice(device);
  std::lock_guard<std::mutex> lk(d.mu);
  for (CUstream_st* b : d.streams) {
    if (b->blocking() && b->completed.load(std::memory_order_acquire) <
                             b->enqueued.load(std::memory_order_acquire))
      return true;
  }
  return false;
}

}  // namespace

}  // namespace gpusim

void CUstream_st::Release(CUstream_st* s) {
  // The last reference is dropped only after the stream retired (its worker holds one until
  // then), so deleting takes no lock.
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete s;
}

namespace gpusim {

PerThreadStreams::~PerThreadStreams() {
  for (CUstream_st*& st : s) {
    if (!st) continue;
    st->magic.store(0, std::memory_order_relaxed);
    bool running;
    {
      std::lock_guard<std::mutex> lk(st->mu);
      st->destroyed = true;
      running = st->worker_running;
      if (st->worker_idle) st->work_cv.notify_one();
    }
    if (!running) Retire(st);
    CUstream_st::Release(st);
    st = nullptr;
  }
}

CUstream_st* CurrentWorkerStream() { return t_worker_stream; }

static CUstream_st* LegacyStream(int device) {
  Device& d = GetDevice(device);
  CUstream_st* s = d.legacy.load(std::memory_order_acquire);
  if (s) return s;
  std::lock_guard<std::mutex> lk(d.mu);
  s = d.legacy.load(std::memory_order_relaxed);
  return s ? s : NewStreamLocked(d, device, cudaStreamDefault, 0, true, false);
}

CUstream_st* ResolveStream(cudaStream_t handle, bool per_thread) {
  if (handle == nullptr) {
    if (!per_thread) return LegacyStream(CurrentDevice());
    handle = cudaStreamPerThread;
  }
  if (handle == cudaStreamLegacy) return LegacyStream(CurrentDevice());
  if (handle == cudaStreamPerThread) {
    int dev = CurrentDevice();
    CUstream_st*& s = t_pts.s[dev];
    if (!s) s = NewStream(dev, cudaStreamDefault, 0, true);
    return s;
  }
  auto* s = reinterpret_cast<CUstream_st*>(handle);
  return s->magic.load(std::memory_order_relaxed) == CUstream_st::kMagic ? s : nullptr;
}

cudaError_t Enqueue(CUstream_st* s, Op&& op, uint64_t* seq) {
  if (s->capturing.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->capture) return AppendCaptured(s, std::move(op));
  }
  bool wake;
  if (!s->blocking()) {
    std::lock_guard<std::mutex> lk(s->mu);
    wake = PushLocked(s, std::move(op));
    if (seq) *seq = s->enqueued.load(std::memory_order_relaxed);
  } else {
    // Implicit synchronisation of the legacy stream. Both directions are decided under the
    // device lock, so every wait points at work queued strictly earlier: no cycles.
    Device& d = GetDevice(s->device);
    std::lock_guard<std::mutex> dl(d.mu);
    Mark one;
    std::vector<Mark> many;
    if (s->legacy) {
      for (CUstream_st* b : d.streams) {
        if (b == s || !b->blocking()) continue;
        if (b->capturing.load(std::memory_order_acquire)) {
          // The legacy stream would depend on a capturing stream: CUDA refuses and
          // invalidates that capture.
          std::lock_guard<std::mutex> bl(b->mu);
          if (b->capture) b->capture_status = cudaStreamCaptureStatusInvalidated;
          return cudaErrorStreamCaptureImplicit;
        }
        uint64_t n = b->enqueued.load(std::memory_order_acquire);
        if (b->completed.load(std::memory_order_acquire) < n)
          many.push_back({Ref<CUstream_st>(b), n});
      }
    } else if (CUstream_st* l = d.legacy.load(std::memory_order_acquire)) {
      uint64_t n = l->enqueued.load(std::memory_order_acquire);
      if (l->completed.load(std::memory_order_acquire) < n) one = {Ref<CUstream_st>(l), n};
    }
    std::lock_guard<std::mutex> lk(s->mu);
    if (one.s.get()) PushLocked(s, StreamWaitOp{std::move(one.s), one.target});
    for (Mark& m : many) PushLocked(s, StreamWaitOp{std::move(m.s), m.target});
    wake = PushLocked(s, std::move(op));
    if (seq) *seq = s->enqueued.load(std::memory_order_relaxed);
  }
  if (wake) s->work_cv.notify_one();
  return cudaSuccess;
}

void WaitStreamReached(CUstream_st* s, uint64_t target) {
  if (s->completed.load(std::memory_order_acquire) >= target) return;
  std::unique_lock<std::mutex> lk(s->mu);
  ++s->done_waiters;
  s->done_cv.wait(lk, [&] { return s->completed.load(std::memory_order_acquire) >= target; });
  --s->done_waiters;
}

void InvalidateCapture(CUstream_st* s) {
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture) s->capture_status = cudaStreamCaptureStatusInvalidated;
}

cudaError_t SyncStream(CUstream_st* s) {
  if (s->capturing.load(std::memory_order_acquire)) {
    InvalidateCapture(s);
    return cudaErrorStreamCaptureUnsupported;
  }
  // Host functions must not make blocking CUDA calls (CUDA answers cudaErrorNotPermitted); here
  // one would wait for itself or for a stream that waits for it.
  if (CurrentWorkerStream()) return cudaErrorNotPermitted;
  if (s->legacy) {
    // Synchronising the legacy stream also waits for prior work of the blocking streams, as
    // an (empty) legacy-stream operation would.
    for (Mark& m : PendingMarks(s->device, true)) WaitStreamReached(m.s.get(), m.target);
    return cudaSuccess;
  }
  WaitStreamReached(s, s->enqueued.load(std::memory_order_acquire));
  return cudaSuccess;
}

cudaError_t EnqueueAndWait(CUstream_st* s, Op&& op) {
  if (s->capturing.load(std::memory_order_acquire)) {
    InvalidateCapture(s);
    return cudaErrorStreamCaptureUnsupported;
  }
  if (CurrentWorkerStream()) return cudaErrorNotPermitted;
  uint64_t seq = 0;
  cudaError_t e = Enqueue(s, std::move(op), &seq);
  if (e != cudaSuccess) return e;
  WaitStreamReached(s, seq);
  return cudaSuccess;
}

cudaError_t SyncDevice(int device) {
  if (CurrentWorkerStream()) return cudaErrorNotPermitted;
  for (Mark& m : PendingMarks(device, false)) WaitStreamReached(m.s.get(), m.target);
  return cudaSuccess;
}

void Execute(CUstream_st* s, const Op& op, GenCursor* graph) {
  struct Visitor {
    CUstream_st* s;
    GenCursor* graph;
    void operator()(const HostFnOp& o) { o.fn(o.user); }
    void operator()(const CallbackOp& o) { o.fn(o.handle, cudaSuccess, o.user); }
    void operator()(const KernelOp& o) { RunKernel(o, graph != nullptr); }
    void operator()(const CopyOp& o) {
      if (o.height == 1) {
        std::memmove(o.dst, o.src, o.width);
        return;
      }
      for (size_t r = 0; r < o.height; ++r)
        std::memmove(static_cast<char*>(o.dst) + r * o.dpitch,
                     static_cast<const char*>(o.src) + r * o.spitch, o.width);
    }
    void operator()(const SetOp& o) {
      for (size_t r = 0; r < o.height; ++r)
        std::memset(static_cast<char*>(o.dst) + r * o.pitch, o.value, o.width);
    }
    void operator()(const EventRecordOp& o) {
      ReachEvent(o.ev.get(), o.gen ? o.gen : (graph ? graph->Next() : 0));
    }
    void operator()(const EventWaitOp& o) {
      uint64_t gen = o.gen ? o.gen : (graph ? graph->Next() : 0);
      if (gen) WaitEventReached(o.ev.get(), gen);
    }
    void operator()(const StreamWaitOp& o) { WaitStreamReached(o.stream.get(), o.target); }
    void operator()(const FreeOp& o) { FreeDeferred(o.ptr); }
    void operator()(const GraphOp& o) { RunGraph(s, o); }
  };
  std::visit(Visitor{s, graph}, op);
}

// ---- fork ---------------------------------------------------------------------------------
// Worker threads do not survive fork(). The child keeps every stream object but starts
// afresh: work that was pending is dropped (counted as done, so nothing waits for it) and
// workers restart on the next enqueue. The prepare handler takes every lock that guards
// stream state, so the child inherits it consistent.
namespace {

// Queues dropped in forked children: kept reachable (not freed: their Ops may refer to
// objects in an inconsistent state) so leak checkers stay quiet.
std::vector<std::deque<Op>>& Graveyard() {
  static auto* g = new std::vector<std::deque<Op>>;
  return *g;
}

void LockDevice(Device& d) {
  d.mu.lock();
  for (CUstream_st* s : d.streams) s->mu.lock();
}
void UnlockDevice(Device& d) {
  for (CUstream_st* s : d.streams) s->mu.unlock();
  d.mu.unlock();
}
void ResetDeviceStreams(Device& d) {
  for (CUstream_st* s : d.streams) {
    if (!s->queue.empty()) Graveyard().push_back(std::move(s->queue));
    s->queue.clear();
    // Condition variables may count waiters that do not exist in the child.
    new (&s->work_cv) std::condition_variable;
    new (&s->done_cv) std::condition_variable;
    s->completed.store(s->enqueued.load());
    s->done_waiters = 0;
    s->worker_idle = false;
    s->worker_running = false;
    if (s->destroyed) s->retired = true;
  }
  UnlockDevice(d);
  std::lock_guard<std::mutex> lk(d.mu);
  d.streams.erase(std::remove_if(d.streams.begin(), d.streams.end(),
                                 [](CUstream_st* s) { return s->retired; }),
                  d.streams.end());
}

void ForkPrepare() {
  LockRegistryForFork();
  LockMemoryForFork();
  ForEachDevice(LockDevice);
  LockEventsForFork();
}
void ForkParent() {
  UnlockEventsForFork();
  ForEachDevice(UnlockDevice);
  UnlockMemoryForFork(false);
  UnlockRegistryForFork(false);
}
void ForkChild() {
  t_worker_stream = nullptr;
  ResetEventsAfterFork();
  UnlockEventsForFork();
  ForEachDevice(ResetDeviceStreams);
  UnlockMemoryForFork(true);
  UnlockRegistryForFork(true);
}

__attribute__((constructor)) void InstallForkHandlers() {
  pthread_atfork(ForkPrepare, ForkParent, ForkChild);
}

}  // namespace

// ---- the stream API -----------------------------------------------------------------------
namespace api {

cudaError_t StreamQuery(cudaStream_t h, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  if (s->capturing.load(std::memory_order_acquire)) {
    InvalidateCapture(s);
    return Ret(cudaErrorStreamCaptureUnsupported);
  }
  if (s->legacy) return BlockingWorkPending(s->device) ? cudaErrorNotReady : cudaSuccess;
  return s->completed.load(std::memory_order_acquire) >= s->enqueued.load(std::memory_order_acquire)
             ? cudaSuccess
             : cudaErrorNotReady;
}

cudaError_t StreamSynchronize(cudaStream_t h, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  return Ret(SyncStream(s));
}

cudaError_t StreamGetFlags(cudaStream_t h, unsigned* flags, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (!flags) return Ret(cudaErrorInvalidValue);
  *flags = s->flags;
  return cudaSuccess;
}

cudaError_t StreamGetPriority(cudaStream_t h, int* prio, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (!prio) return Ret(cudaErrorInvalidValue);
  *prio = s->priority;
  return cudaSuccess;
}

cudaError_t StreamGetId(cudaStream_t h, unsigned long long* id, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (!id) return Ret(cudaErrorInvalidValue);
  *id = s->id;
  return cudaSuccess;
}

cudaError_t StreamGetDevice(cudaStream_t h, int* device, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (!device) return Ret(cudaErrorInvalidValue);
  *device = s->device;
  return cudaSuccess;
}

cudaError_t StreamAddCallback(cudaStream_t h, cudaStreamCallback_t cb, void* user, unsigned flags,
                              bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (!cb || flags != 0) return Ret(cudaErrorInvalidValue);
  return Ret(Enqueue(s, CallbackOp{cb, user, h}));
}

cudaError_t LaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void* user, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (!fn) return Ret(cudaErrorInvalidValue);
  return Ret(Enqueue(s, HostFnOp{fn, user}));
}

cudaError_t StreamAttachMemAsync(cudaStream_t h, bool pt) {
  // Managed memory is host memory: attaching changes nothing.
  return ResolveStream(h, pt) ? cudaSuccess : Ret(cudaErrorInvalidResourceHandle);
}

}  // namespace api
}  // namespace gpusim

using namespace gpusim;

static cudaError_t CreateStream(cudaStream_t* out, unsigned flags, int priority) {
  if (!out) return Ret(cudaErrorInvalidValue);
  if (flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) return Ret(cudaErrorInvalidValue);
  // Priorities clamp into [greatest, least] = [-5, 0] like an H100's.
  priority = std::clamp(priority, -5, 0);
  *out = NewStream(CurrentDevice(), flags, priority, false);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaStreamCreate(cudaStream_t* s) { return CreateStream(s, 0, 0); }
GPUSIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  return CreateStream(s, flags, 0);
}
GPUSIM_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags,
                                                    int priority) {
  return CreateStream(s, flags, priority);
}

GPUSIM_API cudaError_t cudaStreamDestroy(cudaStream_t h) {
  if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread)
    return Ret(cudaErrorInvalidResourceHandle);
  auto* s = reinterpret_cast<CUstream_st*>(h);
  uint32_t magic = CUstream_st::kMagic;
  if (s->per_thread || !s->magic.compare_exchange_strong(magic, 0))
    return Ret(cudaErrorInvalidResourceHandle);
  // Returns at once; queued work still runs, then the worker retires the stream.
  bool running;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    s->destroyed = true;
    if (s->capture) s->capture_status = cudaStreamCaptureStatusInvalidated;
    running = s->worker_running;
    if (s->worker_idle) s->work_cv.notify_one();
  }
  if (!running) Retire(s);
  CUstream_st::Release(s);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceSynchronize(void) {
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  return Ret(SyncDevice(CurrentDevice()));
}

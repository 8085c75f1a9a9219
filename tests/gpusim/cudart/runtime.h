// Internal to gpusim's libcudart.so.13 stand-in; nothing here is exported (the version script
// keeps only cuda* and __cuda*). One picture shared by the .cc files:
//
//  - Device memory is host memory (memory.cc).
//  - A stream (CUstream_st) is a FIFO of Ops run in order by its own worker thread, started at
//    the first enqueue (stream.cc). The worker holds no lock while an Op runs, so an Op may
//    block for ever (NCCL stand-in collectives are host functions) without stalling any API.
//  - Ordering between streams is expressed as wait Ops: StreamWaitOp (the legacy default
//    stream's implicit synchronisation) and EventWaitOp (cudaStreamWaitEvent).
//  - An event (CUevent_st) counts generations: each cudaEventRecord takes a new one at enqueue
//    time; the worker marks it reached (event.cc). "Not reached yet" is cudaErrorNotReady.
//  - A capturing stream appends Ops to a graph instead of queueing them; cudaGraphLaunch
//    queues one GraphOp that replays them (graph.cc).
//
// Lock order (outer first): kernel registry, memory table, Device::mu, CUstream_st::mu,
// CUevent_st::mu, event registry. No lock is ever held while an Op executes.
#ifndef GPUSIM_CUDART_RUNTIME_H_
#define GPUSIM_CUDART_RUNTIME_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "gpusim/kernels.h"

#define GPUSIM_API extern "C" __attribute__((visibility("default")))

namespace gpusim {

struct KernelBody;
struct OpBox;

// ---- errors.cc -----------------------------------------------------------------------------
// Records e as the calling thread's last error (cudaErrorNotReady is not an error: CUDA never
// makes it sticky) and returns it, so API functions end with `return Ret(e);`.
cudaError_t Ret(cudaError_t e);
// One line on stderr prefixed "gpusim: ". Used for misconfiguration a person must fix.
void Warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// ---- device.cc -----------------------------------------------------------------------------
constexpr int kMaxDevices = 64;
struct Config {
  int device_count = 8;          // GPUSIM_DEVICE_COUNT
  long kernel_default_us = 5;    // GPUSIM_KERNEL_DEFAULT_US
  std::string kernel_libs;       // GPUSIM_KERNEL_LIBS
  bool spin_waits = false;       // GPUSIM_SPIN_WAITS
};
const Config& GetConfig();
int CurrentDevice();
bool ValidDevice(int device);
int64_t NowNs();  // CLOCK_MONOTONIC

// Per-device state. The streams list doubles as the fork-reset registry for streams.
struct Device {
  // Guards `streams` and `legacy`, and serialises enqueues on the legacy stream and on blocking
  // streams so that their implicit waits follow one total order (no wait cycles).
  std::mutex mu;
  std::vector<CUstream_st*> streams;  // every live, not yet retired stream of this device
  std::atomic<CUstream_st*> legacy{nullptr};  // created on first use, never destroyed
  std::atomic<unsigned> flags{0};
  std::atomic<uint64_t> peers{0};     // bit p: peer access to device p enabled
};
Device& GetDevice(int device);
void ForEachDevice(void (*fn)(Device&));  // the configured devices

// ---- intrusive reference counting ----------------------------------------------------------
// Streams and events are shared by their handle, the Ops that mention them, and waiters.
template <class T>
class Ref {
 public:
  Ref() = default;
  explicit Ref(T* p, bool add = true) : p_(p) {
    if (p_ && add) p_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  Ref(const Ref& o) : Ref(o.p_) {}
  Ref(Ref&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() {
    if (p_) T::Release(p_);
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }

 private:
  T* p_ = nullptr;
};

// ---- Ops: the units of work a stream runs ---------------------------------------------------
// Kernel arguments copied at launch time. Small argument lists (the common case) stay inline
// so a launch does not touch the heap.
class ArgBuf {
 public:
  ArgBuf() = default;
  ArgBuf(const ArgBuf& o) { std::memcpy(Allocate(o.size_), o.data(), o.size_); }
  ArgBuf& operator=(const ArgBuf& o) {
    if (this != &o) std::memcpy(Allocate(o.size_), o.data(), o.size_);
    return *this;
  }
  ArgBuf(ArgBuf&& o) noexcept : size_(o.size_), heap_(std::move(o.heap_)) {
    if (!heap_) std::memcpy(inline_, o.inline_, size_);
  }
  ArgBuf& operator=(ArgBuf&&) = delete;
  std::byte* Allocate(size_t n) {
    size_ = n;
    if (n <= sizeof(inline_)) {
      heap_.reset();
      return inline_;
    }
    heap_.reset(new std::byte[n]);
    return heap_.get();
  }
  const std::byte* data() const { return heap_ ? heap_.get() : inline_; }
  std::byte* data() { return heap_ ? heap_.get() : inline_; }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
  alignas(16) std::byte inline_[96];
  std::unique_ptr<std::byte[]> heap_;
};

struct HostFnOp {
  cudaHostFn_t fn;
  void* user;
};
struct CallbackOp {
  cudaStreamCallback_t fn;
  void* user;
  cudaStream_t handle;
};
struct KernelOp {
  CUkern_st* kernel;
  const KernelBody* body;  // null: no CPU body, sleep GPUSIM_KERNEL_DEFAULT_US
  dim3 grid, block;
  size_t smem;
  cudaStream_t handle;  // as the application passed it
  ArgBuf args;
};
struct CopyOp {  // 1D copies have height 1; memmove so overlapping ranges are harmless
  void* dst;
  const void* src;
  size_t width, height, dpitch, spitch;
};
struct SetOp {
  void* dst;
  int value;
  size_t width, height, pitch;
};
struct EventRecordOp {
  Ref<CUevent_st> ev;
  uint64_t gen;  // 0 inside a graph body: the launch supplies it
};
struct EventWaitOp {
  Ref<CUevent_st> ev;
  uint64_t gen;  // 0 inside a graph body: the launch supplies it
};
struct StreamWaitOp {
  Ref<CUstream_st> stream;
  uint64_t target;  // wait until stream->completed >= target
};
struct FreeOp {
  void* ptr;
};
struct GraphOp {
  std::shared_ptr<const std::vector<OpBox>> body;
  std::vector<uint64_t> gens;  // one per event op in body, assigned at cudaGraphLaunch
};
using Op = std::variant<HostFnOp, CallbackOp, KernelOp, CopyOp, SetOp, EventRecordOp, EventWaitOp,
                        StreamWaitOp, FreeOp, GraphOp>;
struct OpBox {  // lets GraphOp name a vector of Ops before Op is complete
  Op op;
};

// ---- stream.cc -----------------------------------------------------------------------------
// Resolves a handle as the API received it. per_thread: the _ptsz/_ptds entry points, where
// 0 means the calling thread's per-thread default stream. Null on a bad handle.
CUstream_st* ResolveStream(cudaStream_t handle, bool per_thread);
// Queues op (or appends it to the capture graph). Errors: capture invalidated or implicit
// dependency of the legacy stream on a capturing stream.
cudaError_t Enqueue(CUstream_st* s, Op&& op, uint64_t* seq = nullptr);
// Blocks the caller until every Op queued on s before the call has run (for the legacy stream,
// also prior work of blocking streams). cudaErrorStreamCaptureUnsupported if s is capturing.
cudaError_t SyncStream(CUstream_st* s);
// Runs op on s and waits for it: the synchronous API variants (cudaMemcpy, ...).
cudaError_t EnqueueAndWait(CUstream_st* s, Op&& op);
cudaError_t SyncDevice(int device);
void WaitStreamReached(CUstream_st* s, uint64_t target);
// Hands out the event generations a graph launch assigned, in body order.
struct GenCursor {
  const uint64_t* gens;
  size_t n;
  size_t i = 0;
  uint64_t Next() { return i < n ? gens[i++] : 0; }
};
// Executes one Op on the calling (worker) thread; graph: null for a top-level Op.
void Execute(CUstream_st* s, const Op& op, GenCursor* graph);
// The stream whose worker is the calling thread, or null.
CUstream_st* CurrentWorkerStream();
// Capture helpers used by graph.cc (stream mutex taken inside).
void InvalidateCapture(CUstream_st* s);

// ---- event.cc ------------------------------------------------------------------------------
bool ValidEvent(cudaEvent_t e);
uint64_t NewRecordGeneration(CUevent_st* ev);  // at enqueue of a record
uint64_t CurrentRecordGeneration(CUevent_st* ev);
void ReachEvent(CUevent_st* ev, uint64_t gen);  // gen 0: take a new generation now
void WaitEventReached(CUevent_st* ev, uint64_t gen);
void MarkEventCaptured(CUevent_st* ev, unsigned long long capture_id);
unsigned long long EventCaptureId(CUevent_st* ev);
void ResetEventsAfterFork();
void LockEventsForFork();
void UnlockEventsForFork();

// ---- memory.cc -----------------------------------------------------------------------------
void FreeDeferred(void* ptr);  // the FreeOp of cudaFreeAsync
void LockMemoryForFork();
void UnlockMemoryForFork(bool child);

// ---- registry.cc ---------------------------------------------------------------------------
struct KernelBody {
  std::string name;
  gpusim_kernel_fn fn;
  std::vector<size_t> offsets;  // where argument i lives in the copied argument block
  std::vector<size_t> sizes;
  size_t total = 0;
};
// Host stub or cudaKernel_t -> kernel record; null if unknown.
CUkern_st* FindKernel(const void* func_or_handle);
const KernelBody* ResolveBody(CUkern_st* k);  // loads GPUSIM_KERNEL_LIBS on first call
const char* KernelName(CUkern_st* k);
// Whether p lies inside a registered __device__ or __managed__ variable's storage.
bool InSymbol(const void* p);
void LockRegistryForFork();
void UnlockRegistryForFork(bool child);

// ---- launch.cc -----------------------------------------------------------------------------
cudaError_t LaunchKernel(CUkern_st* k, dim3 grid, dim3 block, void** args, size_t smem,
                         cudaStream_t handle, bool per_thread);
void RunKernel(const KernelOp& op, bool copy_args);

// ---- graph.cc ------------------------------------------------------------------------------
cudaError_t AppendCaptured(CUstream_st* s, Op&& op);  // s->mu held by the caller
// CUDA's rule for "potentially unsafe" calls during stream capture (cudaStreamBeginCapture,
// cudaThreadExchangeStreamCaptureMode): unless the calling thread's mode is relaxed, such a call
// is prohibited while the thread itself captures in a non-relaxed mode, or, when the thread's
// mode is global (the default), while any other thread captures in global mode. A prohibited
// call invalidates those captures and fails with cudaErrorStreamCaptureUnsupported. Called
// first by the unsafe entry points (event/stream queries and synchronization, device
// synchronization, synchronous allocation, free and copy); no lock held by the caller.
cudaError_t CheckCaptureSafe();
void RunGraph(CUstream_st* s, const GraphOp& g);
void DeleteGraph(CUgraph_st* g);

// Per-thread entry points call these with per_thread = true (ptsz.cc); the plain exported
// functions call them with false. Defined next to their plain counterparts.
namespace api {
cudaError_t MemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s,
                        bool pt);
cudaError_t Memcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, bool pt);
cudaError_t Memcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                          size_t height, cudaMemcpyKind kind, cudaStream_t s, bool pt, bool sync);
cudaError_t MemcpyPeerAsync(void* dst, int dd, const void* src, int sd, size_t n, cudaStream_t s,
                            bool pt, bool sync);
cudaError_t MemcpyToSymbol(const void* symbol, const void* src, size_t n, size_t offset,
                           cudaMemcpyKind kind, cudaStream_t s, bool pt, bool sync);
cudaError_t MemcpyFromSymbol(void* dst, const void* symbol, size_t n, size_t offset,
                             cudaMemcpyKind kind, cudaStream_t s, bool pt, bool sync);
cudaError_t Memset2DAsync(void* dst, size_t pitch, int value, size_t width, size_t height,
                          cudaStream_t s, bool pt, bool sync);
cudaError_t MallocAsync(void** p, size_t n, cudaStream_t s, bool pt);
cudaError_t FreeAsync(void* p, cudaStream_t s, bool pt);
cudaError_t MemPrefetchAsync(cudaStream_t s, bool pt);
cudaError_t StreamQuery(cudaStream_t s, bool pt);
cudaError_t StreamSynchronize(cudaStream_t s, bool pt);
cudaError_t StreamGetFlags(cudaStream_t s, unsigned* flags, bool pt);
cudaError_t StreamGetPriority(cudaStream_t s, int* prio, bool pt);
cudaError_t StreamGetId(cudaStream_t s, unsigned long long* id, bool pt);
cudaError_t StreamGetDevice(cudaStream_t s, int* device, bool pt);
cudaError_t StreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags, bool pt);
cudaError_t StreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void* user, unsigned flags,
                              bool pt);
cudaError_t StreamAttachMemAsync(cudaStream_t s, bool pt);
cudaError_t LaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user, bool pt);
cudaError_t EventRecord(cudaEvent_t e, cudaStream_t s, unsigned flags, bool pt);
cudaError_t LaunchKernelByFunc(const void* func, dim3 grid, dim3 block, void** args, size_t smem,
                               cudaStream_t s, bool pt);
cudaError_t LaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args,
                            bool pt);
cudaError_t StreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode, bool pt);
cudaError_t StreamEndCapture(cudaStream_t s, cudaGraph_t* graph, bool pt);
cudaError_t StreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status, bool pt);
cudaError_t StreamGetCaptureInfo(cudaStream_t s, cudaStreamCaptureStatus* status,
                                 unsigned long long* id, cudaGraph_t* graph,
                                 const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                 size_t* num_deps, bool pt);
cudaError_t GraphLaunch(cudaGraphExec_t exec, cudaStream_t s, bool pt);
cudaError_t GraphUpload(cudaGraphExec_t exec, cudaStream_t s, bool pt);
}  // namespace api

}  // namespace gpusim

// The handle types the CUDA headers leave incomplete, completed here.
struct CUstream_st {
  static constexpr uint32_t kMagic = 0x53545245;  // "STRE"
  static void Release(CUstream_st* s);

  CUstream_st(int dev, unsigned fl, int prio, bool is_legacy, bool is_per_thread,
              unsigned long long stream_id)
      : device(dev), flags(fl), priority(prio), legacy(is_legacy), per_thread(is_per_thread),
        id(stream_id) {}

  std::atomic<uint32_t> magic{kMagic};  // cleared by cudaStreamDestroy
  std::atomic<int> refs{1};
  const int device;
  const unsigned flags;
  const int priority;
  const bool legacy;
  const bool per_thread;
  const unsigned long long id;
  bool blocking() const { return !(flags & cudaStreamNonBlocking); }

  std::mutex mu;
  std::condition_variable work_cv;  // worker waits for Ops
  std::condition_variable done_cv;  // synchronising threads wait for `completed`
  std::deque<gpusim::Op> queue;     // GUARDED_BY(mu)
  // Written under mu, read lock-free by Query and by the implicit-sync snapshots.
  std::atomic<uint64_t> enqueued{0};
  std::atomic<uint64_t> completed{0};
  int done_waiters = 0;         // GUARDED_BY(mu)
  bool worker_idle = false;     // GUARDED_BY(mu)
  bool worker_running = false;  // GUARDED_BY(mu)
  bool destroyed = false;       // GUARDED_BY(mu)
  bool retired = false;         // GUARDED_BY(Device::mu): removed from Device::streams

  // Capture state, GUARDED_BY(mu); `capturing` mirrors capture != null for a lock-free check.
  std::atomic<bool> capturing{false};
  CUgraph_st* capture = nullptr;
  cudaStreamCaptureStatus capture_status = cudaStreamCaptureStatusNone;
  unsigned long long capture_id = 0;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
};

struct CUevent_st {
  static constexpr uint32_t kMagic = 0x45564e54;  // "EVNT"
  static void Release(CUevent_st* e);

  explicit CUevent_st(unsigned fl) : flags(fl) {}

  std::atomic<uint32_t> magic{kMagic};
  std::atomic<int> refs{1};
  const unsigned flags;
  std::mutex mu;
  std::condition_variable cv;
  // record_gen: generations handed out by records; reached_gen: the newest one a stream has
  // reached. Both only grow; written under mu, read lock-free by cudaEventQuery.
  std::atomic<uint64_t> record_gen{0};
  std::atomic<uint64_t> reached_gen{0};
  int64_t reached_ns = 0;  // GUARDED_BY(mu): host time when reached_gen was reached
  int waiters = 0;         // GUARDED_BY(mu)
  // Non-zero while the newest record was captured into a graph (capture id).
  std::atomic<unsigned long long> captured_in{0};
};

// A kernel as the program registered it; also what cudaKernel_t / cudaFunction_t point to.
// Never freed: handles are cached in static variables of the program.
struct CUkern_st {
  static constexpr uint32_t kMagic = 0x4b45524e;  // "KERN"
  uint32_t magic = kMagic;
  const void* host_stub = nullptr;
  void** module = nullptr;
  std::string device_name;
  std::atomic<bool> resolved{false};
  std::atomic<const gpusim::KernelBody*> body{nullptr};
  std::atomic<int> max_dynamic_smem{0};
};

#endif  // GPUSIM_CUDART_RUNTIME_H_

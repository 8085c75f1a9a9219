// Memory: device, pinned, registered and managed memory are all host memory. A table of live
// allocations answers cudaPointerGetAttributes, refuses bad frees, and counts device bytes for
// cudaMemGetInfo. Copies and sets run on streams as Ops.
#include <sys/mman.h>

#include <cstdlib>
#include <map>

#include "runtime.h"

namespace gpusim {
namespace {

constexpr size_t kDeviceMem = 80ull << 30;
constexpr size_t kAlign = 256;  // cudaMalloc's guaranteed alignment
// Device memory is HBM: no host page table stands between a kernel or a copy engine and it.
// Here it is host memory, and on a virtual machine with shadow paging each 4 KiB page costs
// microseconds whenever the hypervisor rebuilds its entry (after another process churned
// memory), a cost a device-to-host copy never pays on a GPU. Large device allocations are
// therefore aligned to and advised onto 2 MiB pages, one entry where there were 512.
constexpr size_t kHugePage = 2ull << 20;

enum class Kind { kDevice, kHost, kRegistered, kManaged };

struct Alloc {
  size_t size;
  Kind kind;
  int device;
  unsigned flags;
};

struct Mark {
  Ref<CUstream_st> s;
  uint64_t target;
};

// A cudaFree'd block still in use by queued work: freed once every stream that had work
// queued at the time of the free has finished it (the implicit synchronisation of the real
// cudaFree, without blocking the caller behind, say, a hung collective).
struct PendingFree {
  void* ptr;
  std::vector<Mark> marks;
};

struct Table {
  std::mutex mu;
  std::map<uintptr_t, Alloc> allocs;  // GUARDED_BY(mu), keyed by start address
  size_t device_used[kMaxDevices] = {};
  std::vector<PendingFree> pending;  // GUARDED_BY(mu)
};

Table& T() {
  static auto* t = new Table;  // leaked: workers may free memory while statics are destroyed
  return *t;
}

// The allocation containing p, or end(). T().mu held.
std::map<uintptr_t, Alloc>::iterator Find(const void* p) {
  auto& m = T().allocs;
  auto a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return m.end();
  --it;
  return a < it->first + std::max<size_t>(it->second.size, 1) ? it : m.end();
}

void DrainPendingLocked() {
  auto& pending = T().pending;
  for (size_t i = 0; i < pending.size();) {
    bool done = true;
    for (Mark& m : pending[i].marks)
      done = done && m.s->completed.load(std::memory_order_acquire) >= m.target;
    if (!done) {
      ++i;
      continue;
    }
    free(pending[i].ptr);
    pending[i] = std::move(pending.back());
    pending.pop_back();
  }
}

// Frees now if no stream has unfinished work, else parks the block in `pending`.
void FreeWhenIdleLocked(void* p) {
  std::vector<Mark> marks;
  for (int d = 0; d < GetConfig().device_count; ++d) {
    Device& dev = GetDevice(d);
    std::lock_guard<std::mutex> lk(dev.mu);
    for (CUstream_st* s : dev.streams) {
      uint64_t n = s->enqueued.load(std::memory_order_acquire);
      if (s->completed.load(std::memory_order_acquire) < n) marks.push_back({Ref<CUstream_st>(s), n});
    }
  }
  if (marks.empty())
    free(p);
  else
    T().pending.push_back({p, std::move(marks)});
}

cudaError_t Allocate(void** out, size_t size, Kind kind, unsigned flags) {
  if (!out) return cudaErrorInvalidValue;
  if (size == 0) {
    *out = nullptr;
    return cudaSuccess;
  }
  int dev = CurrentDevice();
  Table& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  DrainPendingLocked();
  bool counts = kind == Kind::kDevice || kind == Kind::kManaged;
  if (counts && size > kDeviceMem - t.device_used[dev]) return cudaErrorMemoryAllocation;
  void* p = nullptr;
  size_t rounded = (size + kAlign - 1) / kAlign * kAlign;
  const bool huge = counts && rounded >= kHugePage;
  if (posix_memalign(&p, huge ? kHugePage : kAlign, rounded) != 0) return cudaErrorMemoryAllocation;
  if (huge) (void)madvise(p, rounded / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only
  t.allocs[reinterpret_cast<uintptr_t>(p)] = Alloc{size, kind, dev, flags};
  if (counts) t.device_used[dev] += size;
  *out = p;
  return cudaSuccess;
}

// Frees an allocation of one of `kinds`; a pointer that is not the start of one is refused
// the way CUDA refuses it.
cudaError_t Release(void* p, bool device_kinds) {
  if (!p) return cudaSuccess;
  Table& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  DrainPendingLocked();
  auto it = t.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == t.allocs.end()) return cudaErrorInvalidValue;
  Kind k = it->second.kind;
  bool ok = device_kinds ? (k == Kind::kDevice || k == Kind::kManaged) : k == Kind::kHost;
  if (!ok) return cudaErrorInvalidValue;
  if (device_kinds) t.device_used[it->second.device] -= it->second.size;
  t.allocs.erase(it);
  FreeWhenIdleLocked(p);
  return cudaSuccess;
}

bool IsDeviceMemory(const void* p) {
  std::lock_guard<std::mutex> lk(T().mu);
  auto it = Find(p);
  return it != T().allocs.end() && it->second.kind == Kind::kDevice;
}

bool ValidKind(cudaMemcpyKind kind) {
  return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault;
}

// CUDA knows an address that lies in one of its allocations (device, managed, pinned or
// registered host memory) or in a __device__ variable.
bool KnownToCuda(const void* p) {
  {
    std::lock_guard<std::mutex> lk(T().mu);
    if (Find(p) != T().allocs.end()) return true;
  }
  return InSymbol(p);
}

// A copy whose device side CUDA does not know (memory already cudaFree'd, or plain pageable
// memory named as device memory) fails with cudaErrorInvalidValue before anything is queued;
// copying from it anyway would read freed memory, or memory another allocation now owns.
// cudaMemcpyDefault and host-to-host copies name no device side.
bool DeviceSidesKnown(const void* dst, const void* src, cudaMemcpyKind kind) {
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  return (!src_device || KnownToCuda(src)) && (!dst_device || KnownToCuda(dst));
}

// Registered __device__ variables: the host shadow is the storage (see registry.cc).
cudaError_t SymbolRange(const void* symbol, size_t offset, size_t n, char** at);

}  // namespace

void FreeDeferred(void* p) { free(p); }

void LockMemoryForFork() { T().mu.lock(); }
void UnlockMemoryForFork(bool) { T().mu.unlock(); }

namespace api {

cudaError_t MemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t h,
                        bool pt) {
  if (!ValidKind(kind)) return Ret(cudaErrorInvalidMemcpyDirection);
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (n == 0) return cudaSuccess;
  if (!dst || !src || !DeviceSidesKnown(dst, src, kind)) return Ret(cudaErrorInvalidValue);
  return Ret(Enqueue(s, CopyOp{dst, src, n, 1, n, n}));
}

cudaError_t Memcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, bool pt) {
  if (!ValidKind(kind)) return Ret(cudaErrorInvalidMemcpyDirection);
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  CUstream_st* s = ResolveStream(nullptr, pt);
  if (n == 0) return cudaSuccess;
  if (!dst || !src || !DeviceSidesKnown(dst, src, kind)) return Ret(cudaErrorInvalidValue);
  // Device-to-device copies do not block the host in CUDA; everything else returns when the
  // copy is done, after the stream's earlier work.
  bool d2d = kind == cudaMemcpyDeviceToDevice ||
             (kind == cudaMemcpyDefault && IsDeviceMemory(dst) && IsDeviceMemory(src));
  Op op = CopyOp{dst, src, n, 1, n, n};
  return Ret(d2d ? Enqueue(s, std::move(op)) : EnqueueAndWait(s, std::move(op)));
}

cudaError_t Memcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                          size_t height, cudaMemcpyKind kind, cudaStream_t h, bool pt, bool sync) {
  if (!ValidKind(kind)) return Ret(cudaErrorInvalidMemcpyDirection);
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (width > dpitch || width > spitch) return Ret(cudaErrorInvalidPitchValue);
  if (width == 0 || height == 0) return cudaSuccess;
  if (!dst || !src || !DeviceSidesKnown(dst, src, kind)) return Ret(cudaErrorInvalidValue);
  Op op = CopyOp{dst, src, width, height, dpitch, spitch};
  return Ret(sync ? EnqueueAndWait(s, std::move(op)) : Enqueue(s, std::move(op)));
}

cudaError_t MemcpyPeerAsync(void* dst, int dd, const void* src, int sd, size_t n, cudaStream_t h,
                            bool pt, bool sync) {
  if (!ValidDevice(dd) || !ValidDevice(sd)) return Ret(cudaErrorInvalidDevice);
  if (sync) return Memcpy(dst, src, n, cudaMemcpyDeviceToDevice, pt);
  return MemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, h, pt);
}

cudaError_t Memset2DAsync(void* dst, size_t pitch, int value, size_t width, size_t height,
                          cudaStream_t h, bool pt, bool sync) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (height > 1 && width > pitch) return Ret(cudaErrorInvalidPitchValue);
  if (width == 0 || height == 0) return cudaSuccess;
  if (!dst) return Ret(cudaErrorInvalidValue);
  Op op = SetOp{dst, value, width, height, pitch};
  // cudaMemset does not block the host for device memory; it does for host memory.
  if (sync && !IsDeviceMemory(dst)) return Ret(EnqueueAndWait(s, std::move(op)));
  return Ret(Enqueue(s, std::move(op)));
}

cudaError_t MemcpyToSymbol(const void* symbol, const void* src, size_t n, size_t offset,
                           cudaMemcpyKind kind, cudaStream_t h, bool pt, bool sync) {
  char* at;
  if (cudaError_t e = SymbolRange(symbol, offset, n, &at)) return Ret(e);
  return sync ? Memcpy(at, src, n, kind, pt) : MemcpyAsync(at, src, n, kind, h, pt);
}

cudaError_t MemcpyFromSymbol(void* dst, const void* symbol, size_t n, size_t offset,
                             cudaMemcpyKind kind, cudaStream_t h, bool pt, bool sync) {
  char* at;
  if (cudaError_t e = SymbolRange(symbol, offset, n, &at)) return Ret(e);
  return sync ? Memcpy(dst, at, n, kind, pt) : MemcpyAsync(dst, at, n, kind, h, pt);
}

cudaError_t MallocAsync(void** p, size_t n, cudaStream_t h, bool pt) {
  // Stream-ordered allocation: the memory exists at once, which is a legal schedule of
  // "available when the stream gets here".
  if (!ResolveStream(h, pt)) return Ret(cudaErrorInvalidResourceHandle);
  return Ret(Allocate(p, n, Kind::kDevice, 0));
}

cudaError_t FreeAsync(void* p, cudaStream_t h, bool pt) {
  CUstream_st* s = ResolveStream(h, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  if (!p) return cudaSuccess;
  // A free captured into a graph would run once per replay; the block is kept instead.
  if (s->capturing.load(std::memory_order_acquire)) return cudaSuccess;
  {
    Table& t = T();
    std::lock_guard<std::mutex> lk(t.mu);
    auto it = t.allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it == t.allocs.end() || it->second.kind != Kind::kDevice) return Ret(cudaErrorInvalidValue);
    t.device_used[it->second.device] -= it->second.size;
    t.allocs.erase(it);
  }
  // Freed when the stream gets here; other streams must order themselves with events, as on
  // a GPU.
  return Ret(Enqueue(s, FreeOp{p}));
}

cudaError_t MemPrefetchAsync(cudaStream_t h, bool pt) {
  return ResolveStream(h, pt) ? cudaSuccess : Ret(cudaErrorInvalidResourceHandle);
}

}  // namespace api

// Lives here for the table's lock; registry.cc owns the variable list.
bool LookupSymbol(const void* symbol, size_t* size);
namespace {
cudaError_t SymbolRange(const void* symbol, size_t offset, size_t n, char** at) {
  size_t size = 0;
  if (!LookupSymbol(symbol, &size)) return cudaErrorInvalidSymbol;
  if (offset > size || n > size - offset) return cudaErrorInvalidValue;
  *at = static_cast<char*>(const_cast<void*>(symbol)) + offset;
  return cudaSuccess;
}
}  // namespace

}  // namespace gpusim

using namespace gpusim;

GPUSIM_API cudaError_t cudaMalloc(void** p, size_t n) {
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  return Ret(Allocate(p, n, Kind::kDevice, 0));
}

GPUSIM_API cudaError_t cudaFree(void* p) {
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  return Ret(Release(p, true));
}

GPUSIM_API cudaError_t cudaMallocManaged(void** p, size_t n, unsigned int flags) {
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost) return Ret(cudaErrorInvalidValue);
  return Ret(Allocate(p, n, Kind::kManaged, flags));
}

GPUSIM_API cudaError_t cudaMallocPitch(void** p, size_t* pitch, size_t width, size_t height) {
  if (!pitch) return Ret(cudaErrorInvalidValue);
  *pitch = (width + 511) / 512 * 512;
  return Ret(Allocate(p, *pitch * height, Kind::kDevice, 0));
}

GPUSIM_API cudaError_t cudaMallocHost(void** p, size_t n) {
  if (cudaError_t c = CheckCaptureSafe(); c != cudaSuccess) return Ret(c);
  return Ret(Allocate(p, n, Kind::kHost, 0));
}

GPUSIM_API cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int flags) {
  if (flags & ~0x7u) return Ret(cudaErrorInvalidValue);
  return Ret(Allocate(p, n, Kind::kHost, flags));
}

GPUSIM_API cudaError_t cudaFreeHost(void* p) { return Ret(Release(p, false)); }

GPUSIM_API cudaError_t cudaHostRegister(void* p, size_t n, unsigned int flags) {
  if (!p || n == 0 || (flags & ~0xfu)) return Ret(cudaErrorInvalidValue);
  Table& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  auto a = reinterpret_cast<uintptr_t>(p);
  // Any overlap with a registered or pinned range is refused, as CUDA does.
  auto it = t.allocs.lower_bound(a);
  if (it != t.allocs.end() && it->first < a + n) return Ret(cudaErrorHostMemoryAlreadyRegistered);
  if (Find(p) != t.allocs.end()) return Ret(cudaErrorHostMemoryAlreadyRegistered);
  t.allocs[a] = Alloc{n, Kind::kRegistered, CurrentDevice(), flags};
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaHostUnregister(void* p) {
  Table& t = T();
  std::lock_guard<std::mutex> lk(t.mu);
  auto it = t.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == t.allocs.end() || it->second.kind != Kind::kRegistered)
    return Ret(cudaErrorHostMemoryNotRegistered);
  t.allocs.erase(it);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaHostGetDevicePointer(void** dev, void* host, unsigned int flags) {
  if (!dev || flags != 0) return Ret(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lk(T().mu);
  auto it = Find(host);
  if (it == T().allocs.end() || it->second.kind == Kind::kDevice) return Ret(cudaErrorInvalidValue);
  *dev = host;  // mapped memory has the same address on both sides (UVA)
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaHostGetFlags(unsigned int* flags, void* host) {
  if (!flags) return Ret(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lk(T().mu);
  auto it = Find(host);
  if (it == T().allocs.end() || it->second.kind != Kind::kHost) return Ret(cudaErrorInvalidValue);
  *flags = it->second.flags;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  std::lock_guard<std::mutex> lk(T().mu);
  DrainPendingLocked();
  if (free_bytes) *free_bytes = kDeviceMem - T().device_used[CurrentDevice()];
  if (total) *total = kDeviceMem;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* p) {
  if (!attr) return Ret(cudaErrorInvalidValue);
  *attr = cudaPointerAttributes{};
  std::lock_guard<std::mutex> lk(T().mu);
  auto it = Find(p);
  if (it == T().allocs.end()) {
    // CUDA 11+: memory it does not know is "unregistered", not an error.
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
    return cudaSuccess;
  }
  attr->device = it->second.device;
  void* q = const_cast<void*>(p);
  switch (it->second.kind) {
    case Kind::kDevice:
      attr->type = cudaMemoryTypeDevice;
      attr->devicePointer = q;
      break;
    case Kind::kHost:
    case Kind::kRegistered:
      attr->type = cudaMemoryTypeHost;
      attr->devicePointer = q;
      attr->hostPointer = q;
      break;
    case Kind::kManaged:
      attr->type = cudaMemoryTypeManaged;
      attr->devicePointer = q;
      attr->hostPointer = q;
      break;
  }
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaMemcpyPeer(void* dst, int dd, const void* src, int sd, size_t n) {
  return api::MemcpyPeerAsync(dst, dd, src, sd, n, nullptr, false, true);
}
GPUSIM_API cudaError_t cudaMemcpyPeerAsync(void* dst, int dd, const void* src, int sd, size_t n,
                                           cudaStream_t s) {
  return api::MemcpyPeerAsync(dst, dd, src, sd, n, s, false, false);
}
GPUSIM_API cudaError_t cudaGetSymbolAddress(void** p, const void* sym) {
  size_t size;
  if (!p) return Ret(cudaErrorInvalidValue);
  if (!LookupSymbol(sym, &size)) return Ret(cudaErrorInvalidSymbol);
  *p = const_cast<void*>(sym);
  return cudaSuccess;
}
GPUSIM_API cudaError_t cudaGetSymbolSize(size_t* size, const void* sym) {
  if (!size) return Ret(cudaErrorInvalidValue);
  return LookupSymbol(sym, size) ? cudaSuccess : Ret(cudaErrorInvalidSymbol);
}
GPUSIM_API cudaError_t cudaMemAdvise(const void*, size_t, cudaMemoryAdvise, cudaMemLocation) {
  return cudaSuccess;
}

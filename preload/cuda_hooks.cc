// The CUDA runtime hooks (runtime.h): API errors, graph launches timed as one op, allocations,
// kernel names. App threads only.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "preload/api_symbol_ids.h"
#include "preload/ckpt/ckpt_agent.h"
#include "preload/hook_failures.h"
#include "preload/runtime.h"
#include "preload/runtime_state.h"
#include "preload/timing.h"
#include "shm/records.h"

namespace ft::preload {

// As the unnamed namespace this code lived in: the internals are found unqualified.
using namespace internal;

void CudaApiError(CudaSym sym, cudaError_t result) noexcept {
  if (g_rt == nullptr) return;
  auto r = MakeRecord(RecordType::kApiError, kFlagError, kNoSlot, 0, 0, NowNs());
  r.a = static_cast<uint64_t>(ApiLibrary::kCudart);
  r.b = ApiSymbolIdOf(sym);
  r.c = static_cast<uint64_t>(result);
  Push(r);
}

Pending* CudaGraphPre(cudaStream_t stream) noexcept {
  NoteCall();
  try {
    MaybeFail(shm::HookPlace::kCudaGraphPre);
    AppCuda cuda;
    if (StreamCapturing(stream, cuda) != Capture::kNo) return nullptr;
    Pending* p = BeginTiming(stream, cuda);
    if (p == nullptr) return nullptr;
    uint64_t n = g_rt->graph_launches.fetch_add(1) + 1;
    OpRef ref;
    ref.seq = n;
    ref.entered_ns = NowNs();
    ref.record_seq = n;
    ref.record_a = shm::OpArgsWord(OpKind::kGraphLaunch, 0, shm::kNoPeer);
    p->AddOp(ref);
    return p;
  } catch (...) {
    CountHookFailure(shm::HookPlace::kCudaGraphPre);
    return nullptr;
  }
}

void CudaGraphPost(Pending* p, cudaStream_t, cudaError_t result) noexcept {
  if (result != cudaSuccess) CudaApiError(CudaSym::k_cudaGraphLaunch, result);
  if (p == nullptr) return;
  try {
    MaybeFail(shm::HookPlace::kCudaGraphPost);
    AppCuda cuda;
    p->failed = result != cudaSuccess;
    Submit(p, !p->failed, cuda);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kCudaGraphPost);
  }
}

void CudaAllocPost(void** ptr, size_t bytes, cudaError_t result) noexcept {
  NoteCall();
  if (result != cudaSuccess || ptr == nullptr) return;
  try {
    MaybeFail(shm::HookPlace::kCudaAllocPost);
    if (!TrackAllocation(*ptr, bytes)) return;  // no room: not tracked
    uint64_t total = g_rt->allocated_bytes.fetch_add(bytes) + bytes;
    auto r = MakeRecord(RecordType::kAlloc, 0, kNoSlot, 0, 0, NowNs());
    r.a = bytes;
    r.b = reinterpret_cast<uintptr_t>(*ptr);
    r.c = total;
    Push(r);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kCudaAllocPost);
  }
}

void CudaFreePost(void* ptr, cudaError_t result) noexcept {
  NoteCall();
  if (result != cudaSuccess || ptr == nullptr) return;
  try {
    MaybeFail(shm::HookPlace::kCudaFreePost);
    uint64_t bytes = 0;
    const bool tracked = UntrackAllocation(ptr, &bytes);
    agent::NoteMemoryFreed(ptr, tracked ? bytes : 1);  // a registered buffer in it is gone
    if (!tracked) return;
    uint64_t total = g_rt->allocated_bytes.fetch_sub(bytes) - bytes;
    auto r = MakeRecord(RecordType::kAlloc, 1, kNoSlot, 0, 0, NowNs());
    r.b = reinterpret_cast<uintptr_t>(ptr);
    r.c = total;
    Push(r);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kCudaFreePost);
  }
}

void CudaRegisterFunctionPost(const char* host_fun, const char* device_name) noexcept {
  NoteCall();
  if (device_name == nullptr) return;
  size_t n = strnlen(device_name, 4096);
  auto r = MakeRecord(RecordType::kKernelName, 0, kNoSlot, 0, 0, NowNs());
  r.a = reinterpret_cast<uintptr_t>(host_fun);
  r.b = Fnv1a(device_name, n);
  char head[16] = {};
  std::memcpy(head, device_name, std::min<size_t>(n, sizeof(head)));
  std::memcpy(&r.c, head, 8);
  std::memcpy(&r.d, head + 8, 8);
  Push(r);
}

void CudaKernelHandlePost(cudaKernel_t* handle, const void* host_stub, cudaError_t result) noexcept {
  NoteCall();
  if (result != cudaSuccess || handle == nullptr) return;
  auto r = MakeRecord(RecordType::kKernelHandle, 0, kNoSlot, 0, 0, NowNs());
  r.a = reinterpret_cast<uintptr_t>(*handle);
  r.b = reinterpret_cast<uintptr_t>(host_stub);
  Push(r);
}

}  // namespace ft::preload

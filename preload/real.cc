#include "preload/real.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace ft::preload {
namespace {

constexpr const char* kNcclNames[] = {
#define FT_NCCL(ret, name, params, args, kind) #name,
#include "preload/nccl.def"
#undef FT_NCCL
};

constexpr const char* kCudaNames[] = {
#define FT_CUDA(ret, name, params, args, kind) #name,
#define FT_CUDA_REAL(ret, name, params) #name,
#include "preload/cudart.def"
#undef FT_CUDA
#undef FT_CUDA_REAL
};

// A library loaded RTLD_LOCAL after us is not in the scope RTLD_NEXT searches; look it up by
// soname among what is already loaded (RTLD_NOLOAD never loads anything).
void* FromLoaded(const char* soname, const char* name) {
  void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* p = dlsym(handle, name);
  dlclose(handle);
  return p;
}

void* LookupNccl(size_t i) {
  const char* name = kNcclNames[i];
  std::string profiled = std::string("p") + name;  // the strong pnccl* alias
  void* p = dlsym(RTLD_NEXT, profiled.c_str());
  if (p == nullptr) p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) p = FromLoaded("libnccl.so.2", profiled.c_str());
  if (p == nullptr) p = FromLoaded("libnccl.so.2", name);
  return p;
}

void* LookupCuda(size_t i) {
  void* p = dlsym(RTLD_NEXT, kCudaNames[i]);
  if (p == nullptr) p = FromLoaded("libcudart.so.13", kCudaNames[i]);
  return p;
}

std::once_flag g_nccl_once;
std::once_flag g_cuda_once;

}  // namespace

namespace detail {

std::atomic<void*> g_nccl_real[static_cast<size_t>(NcclSym::kCount)];
std::atomic<void*> g_cuda_real[static_cast<size_t>(CudaSym::kCount)];

void* ResolveNccl(NcclSym sym) {
  std::call_once(g_nccl_once, [] {
    for (size_t i = 0; i < static_cast<size_t>(NcclSym::kCount); ++i) {
      g_nccl_real[i].store(LookupNccl(i), std::memory_order_release);
    }
  });
  size_t i = static_cast<size_t>(sym);
  void* p = g_nccl_real[i].load(std::memory_order_acquire);
  if (p == nullptr) {  // not loaded at the first call; maybe it is now
    p = LookupNccl(i);
    if (p != nullptr) g_nccl_real[i].store(p, std::memory_order_release);
  }
  return p;
}

void* ResolveCuda(CudaSym sym) {
  std::call_once(g_cuda_once, [] {
    for (size_t i = 0; i < static_cast<size_t>(CudaSym::kCount); ++i) {
      g_cuda_real[i].store(LookupCuda(i), std::memory_order_release);
    }
  });
  size_t i = static_cast<size_t>(sym);
  void* p = g_cuda_real[i].load(std::memory_order_acquire);
  if (p == nullptr) {
    p = LookupCuda(i);
    if (p != nullptr) g_cuda_real[i].store(p, std::memory_order_release);
  }
  return p;
}

}  // namespace detail

const char* NcclSymName(NcclSym sym) { return kNcclNames[static_cast<size_t>(sym)]; }
const char* CudaSymName(CudaSym sym) { return kCudaNames[static_cast<size_t>(sym)]; }

}  // namespace ft::preload

// The real CUDA runtime and NCCL functions behind libft.so's wrappers, generated from
// cudart.def and nccl.def. Resolved lazily, each symbol at its first use, so libcudart or
// libnccl loaded after libft.so (dlopen, as PyTorch does) is found. Where: dlsym(RTLD_NEXT)
// (NCCL: pnccl* first); else the library by its usual soname among loaded objects; else every
// loaded object (a runtime loaded RTLD_LOCAL under another name, as wheels bundle it), never
// libft.so itself. A miss is remembered until another object is loaded (dl_iterate_phdr's
// load count), so a missing symbol costs one cheap check per call, not a search. Thread-safe;
// never throws; allocates only while searching every loaded object.
#ifndef FT_PRELOAD_REAL_H_
#define FT_PRELOAD_REAL_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ft::preload {

enum class NcclSym : uint16_t {
#define FT_NCCL(ret, name, params, args, kind) k_##name,
#include "shm/nccl.def"
#undef FT_NCCL
  kCount
};

enum class CudaSym : uint16_t {
#define FT_CUDA(ret, name, params, args, kind) k_##name,
#define FT_CUDA_REAL(ret, name, params) k_##name,
#include "shm/cudart.def"
#undef FT_CUDA
#undef FT_CUDA_REAL
  kCount
};

const char* NcclSymName(NcclSym sym);
const char* CudaSymName(CudaSym sym);

namespace detail {
extern std::atomic<void*> g_nccl_real[static_cast<size_t>(NcclSym::kCount)];
extern std::atomic<void*> g_cuda_real[static_cast<size_t>(CudaSym::kCount)];
void* ResolveNccl(NcclSym sym);
void* ResolveCuda(CudaSym sym);
}  // namespace detail

// The real function, or nullptr when no loaded library provides it.
inline void* RealNccl(NcclSym sym) {
  void* p = detail::g_nccl_real[static_cast<size_t>(sym)].load(std::memory_order_acquire);
  return p != nullptr ? p : detail::ResolveNccl(sym);
}
inline void* RealCuda(CudaSym sym) {
  void* p = detail::g_cuda_real[static_cast<size_t>(sym)].load(std::memory_order_acquire);
  return p != nullptr ? p : detail::ResolveCuda(sym);
}

// Typed access for libft.so's own calls: FT_REAL_CUDA(cudaEventQuery) is the real
// cudaEventQuery (or nullptr).
#define FT_REAL_CUDA(name) \
  reinterpret_cast<decltype(&::name)>(::ft::preload::RealCuda(::ft::preload::CudaSym::k_##name))
#define FT_REAL_NCCL(name) \
  reinterpret_cast<decltype(&::name)>(::ft::preload::RealNccl(::ft::preload::NcclSym::k_##name))

// A wrapper found no real function: counted as a hook failure (missing_symbol) in the segment.
void NoteMissingReal() noexcept;

// What a wrapper returns when the real function cannot be found at all.
template <class R>
inline R Missing() {
  if constexpr (std::is_same_v<R, ncclResult_t>) {
    return ncclSystemError;
  } else if constexpr (std::is_same_v<R, cudaError_t>) {
    return cudaErrorSharedObjectSymbolNotFound;
  } else if constexpr (std::is_void_v<R>) {
    return;
  } else {
    return R{};
  }
}

template <class R>
inline R MissingReal() {
  NoteMissingReal();
  return Missing<R>();
}

}  // namespace ft::preload

#endif  // FT_PRELOAD_REAL_H_

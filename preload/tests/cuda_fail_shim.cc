// A fault injector for the checkpoint agent's tests, preloaded after libft.so: libft.so's real
// cudaMemcpyAsync (dlsym RTLD_NEXT) is this one, which forwards to the runtime — except
// device-to-host copies while armed (gpusim_shim_fail_d2h(1)), which fail as a GPU fault
// would (cudaErrorIllegalAddress). gpusim itself never fails a valid copy.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>

namespace {
std::atomic<int> g_fail_d2h{0};
}  // namespace

extern "C" {

__attribute__((visibility("default"))) void gpusim_shim_fail_d2h(int on) { g_fail_d2h.store(on); }

__attribute__((visibility("default"))) cudaError_t cudaMemcpyAsync(void* dst, const void* src,
                                                                   size_t count, cudaMemcpyKind kind,
                                                                   cudaStream_t stream) {
  using Fn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "cudaMemcpyAsync"));
  if (g_fail_d2h.load() != 0 && kind == cudaMemcpyDeviceToHost) return cudaErrorIllegalAddress;
  if (real == nullptr) return cudaErrorSharedObjectSymbolNotFound;
  return real(dst, src, count, kind, stream);
}

}  // extern "C"

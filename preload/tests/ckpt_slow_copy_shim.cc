// A copy-speed knob for the snapshot tests (ckpt_snapshot_test.cc), preloaded after libft.so:
// libft.so's real cudaMemcpyAsync (dlsym RTLD_NEXT) is this one. Device-to-host copies are
// forwarded behind a host function queued on their stream first, which
//   - while held (gpusim_shim_hold_d2h(1)), waits until released (gpusim_shim_hold_d2h(0));
//   - with a delay (gpusim_shim_delay_d2h_us(n)), sleeps n µs.
// So a test decides when the agent's copies may run on the device, as a slow PCIe link or a
// busy copy engine would, and a missing order between streams shows as wrong bytes, not luck.
// cudaHostRegister, while held (gpusim_shim_hold_host_register(1)), waits until released: a
// pinning of tens of GiB that is still under way (ckpt_prepare_test.cc).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {
std::atomic<int> g_hold{0};
std::atomic<long> g_delay_us{0};
std::atomic<long> g_held{0};  // host functions waiting now
std::atomic<int> g_hold_register{0};
std::atomic<long> g_held_register{0};  // cudaHostRegister calls waiting now

void Wait(void*) {
  if (g_hold.load() != 0) {
    g_held.fetch_add(1);
    while (g_hold.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    g_held.fetch_sub(1);
  }
  if (long us = g_delay_us.load(); us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}
}  // namespace

extern "C" {

__attribute__((visibility("default"))) void gpusim_shim_hold_d2h(int on) { g_hold.store(on); }
__attribute__((visibility("default"))) void gpusim_shim_delay_d2h_us(long us) { g_delay_us.store(us); }
// How many device-to-host copies wait at the hold now.
__attribute__((visibility("default"))) long gpusim_shim_held_d2h() { return g_held.load(); }

__attribute__((visibility("default"))) cudaError_t cudaMemcpyAsync(void* dst, const void* src,
                                                                   size_t count, cudaMemcpyKind kind,
                                                                   cudaStream_t stream) {
  using Fn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
  using HostFn = cudaError_t (*)(cudaStream_t, cudaHostFn_t, void*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "cudaMemcpyAsync"));
  static HostFn host_fn = reinterpret_cast<HostFn>(dlsym(RTLD_NEXT, "cudaLaunchHostFunc"));
  if (real == nullptr || host_fn == nullptr) return cudaErrorSharedObjectSymbolNotFound;
  if (kind == cudaMemcpyDeviceToHost && (g_hold.load() != 0 || g_delay_us.load() > 0)) {
    if (cudaError_t e = host_fn(stream, Wait, nullptr); e != cudaSuccess) return e;
  }
  return real(dst, src, count, kind, stream);
}

__attribute__((visibility("default"))) void gpusim_shim_hold_host_register(int on) { g_hold_register.store(on); }
__attribute__((visibility("default"))) long gpusim_shim_held_host_register() { return g_held_register.load(); }

__attribute__((visibility("default"))) cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  using Fn = cudaError_t (*)(void*, size_t, unsigned int);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "cudaHostRegister"));
  if (real == nullptr) return cudaErrorSharedObjectSymbolNotFound;
  if (g_hold_register.load() != 0) {
    g_held_register.fetch_add(1);
    while (g_hold_register.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    g_held_register.fetch_sub(1);
  }
  return real(ptr, size, flags);
}

}  // extern "C"

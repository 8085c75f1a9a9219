// CPU bodies of trainsim's kernels, for the gpusim runtime stand-in (tests/gpusim): gpusim
// dlopens this library (GPUSIM_KERNEL_LIBS) and calls gpusim_register_kernels once. Each body
// runs a whole grid on the stream's worker thread and computes exactly what the GPU kernel
// computes: both are expanded from kernel_list.h over the element functions of
// trainsim_math.h. Links nothing CUDA.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>

#include "gpusim/kernels.h"
#include "kernel_list.h"
#include "trainsim_math.h"

namespace trainsim {
namespace {

// Elementwise kernels: name_host(params) loops name_at over [0, n).
#define TS_DEFINE_HOST(name, params, args)            \
  void name##_host params {                           \
    for (int64_t i = 0; i < n; ++i) {                 \
      name##_at(i, TRAINSIM_UNPAREN args);            \
    }                                                 \
  }
TRAINSIM_ELEMENTWISE_KERNELS(TS_DEFINE_HOST)
#undef TS_DEFINE_HOST

// Special kernels: declared from the list, defined below by hand (a parameter list that
// differs from the list leaves the declared one undefined: a link error).
#define TS_DECLARE_HOST(name, params) void name##_host params;
TRAINSIM_SPECIAL_KERNELS(TS_DECLARE_HOST)
#undef TS_DECLARE_HOST

void compute_spin_host(int64_t ns) {
  if (ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
}

// Like the GPU kernel: waits for a flag nobody sets, so the stream never gets past it.
void hang_forever_host(const int* flag) {
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Adapts a C++ function to gpusim's body signature: args[i] points at a copy of argument i.
template <typename F>
struct Body;
template <typename... A>
struct Body<void (*)(A...)> {
  static constexpr int kArgs = static_cast<int>(sizeof...(A));
  static constexpr size_t kSizes[sizeof...(A) > 0 ? sizeof...(A) : 1] = {sizeof(A)...};
  template <void (*Fn)(A...)>
  static void Run(const gpusim_launch* /*launch*/, void** args) {
    Call<Fn>(args, std::index_sequence_for<A...>{});
  }
  template <void (*Fn)(A...), size_t... I>
  static void Call(void** args, std::index_sequence<I...>) {
    Fn(*static_cast<A*>(args[I])...);
  }
};

template <auto Fn>
void Register(gpusim_register_fn reg, const char* name) {
  using B = Body<decltype(Fn)>;
  reg(name, &B::template Run<Fn>, B::kSizes, B::kArgs);
}

}  // namespace
}  // namespace trainsim

extern "C" __attribute__((visibility("default"))) void gpusim_register_kernels(
    gpusim_register_fn register_kernel) {
#define TS_REGISTER(name, ...) \
  trainsim::Register<&trainsim::name##_host>(register_kernel, "trainsim::" #name);
  TRAINSIM_ELEMENTWISE_KERNELS(TS_REGISTER)
  TRAINSIM_SPECIAL_KERNELS(TS_REGISTER)
#undef TS_REGISTER
}

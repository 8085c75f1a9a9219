// The contract between the gpusim runtime stand-in and the libraries that give kernels a CPU
// body. A training program is built by nvcc for a real GPU and knows nothing of this file;
// its CPU kernel bodies live in a separate shared library that gpusim loads (paths listed,
// colon-separated, in GPUSIM_KERNEL_LIBS). gpusim calls that library's
// gpusim_register_kernels() once, before the first kernel runs.
//
// A kernel launched with no registered body runs for GPUSIM_KERNEL_DEFAULT_US microseconds
// (default 5) and touches no memory.
#ifndef GPUSIM_KERNELS_H_
#define GPUSIM_KERNELS_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpusim_dim3 {
  unsigned x, y, z;
} gpusim_dim3;

typedef struct gpusim_launch {
  gpusim_dim3 grid;
  gpusim_dim3 block;
  size_t shared_mem_bytes;
  void* stream;  // the cudaStream_t the kernel was launched on (never NULL-resolved)
} gpusim_launch;

// Runs the whole grid on the calling thread (the stream's worker). args[i] points at a copy
// of the i-th kernel argument, taken at launch time. Device memory is host memory, so
// pointer arguments are directly usable.
typedef void (*gpusim_kernel_fn)(const gpusim_launch* launch, void** args);

// name: the kernel's device name as __cudaRegisterFunction receives it (the mangled name), or
// its unmangled identifier without parameters ("ns::scale" for _ZN2ns5scaleEPffi).
// arg_sizes[nargs]: the size in bytes of each parameter, so a launch can copy them (launches
// are asynchronous and graph capture replays them later).
typedef void (*gpusim_register_fn)(const char* name, gpusim_kernel_fn fn, const size_t* arg_sizes,
                                   int nargs);

// Exported by each kernel library.
void gpusim_register_kernels(gpusim_register_fn register_kernel);

#ifdef __cplusplus
}
#endif

#endif  // GPUSIM_KERNELS_H_

// Every trainsim kernel, declared once. trainsim.cu expands these lists into __global__
// kernels; kernels_cpu.cc expands the same lists into CPU bodies and their registration with
// gpusim, so a kernel's parameter list can never differ between the two.
//
// Elementwise kernels: X(name, (parameters), (arguments of name_at after the index)).
// The last parameter is always `int64_t n`; the kernel runs name_at(i, ...) for i in [0, n)
// (trainsim_math.h), on the GPU with a grid-stride loop, on the CPU with a plain loop.
#ifndef TRAINSIM_KERNEL_LIST_H_
#define TRAINSIM_KERNEL_LIST_H_

#include <stdint.h>

#define TRAINSIM_ELEMENTWISE_KERNELS(X)                                                        \
  X(fill, (float* x, float value, int64_t n), (x, value))                                      \
  X(init_params, (float* w, uint64_t key, int64_t offset, int64_t n), (w, key, offset))        \
  X(load_batch, (float* x, uint64_t key, int64_t n), (x, key))                                 \
  X(forward_partial,                                                                           \
    (const float* w, const float* x, float* part, int64_t shard_offset, int64_t shard_len,     \
     int64_t n),                                                                               \
    (w, x, part, shard_offset, shard_len, n))                                                  \
  X(forward_finish, (const float* y, float* x_out, int64_t layer, int64_t n), (y, x_out, layer)) \
  X(loss_grad, (const float* x, float* g, uint64_t target_key, int64_t n), (x, g, target_key)) \
  X(backward_params,                                                                           \
    (const float* x, const float* g, float* grad, int64_t shard_offset, int64_t hidden,        \
     int64_t n),                                                                               \
    (x, g, grad, shard_offset, hidden))                                                        \
  X(backward_input,                                                                            \
    (const float* w, const float* g, float* part, int64_t shard_offset, int64_t shard_len,     \
     int64_t n),                                                                               \
    (w, g, part, shard_offset, shard_len, n))                                                  \
  X(backward_finish, (const float* s, float* g_out, int64_t layer, int64_t n), (s, g_out, layer)) \
  X(scale, (float* x, float factor, int64_t n), (x, factor))                                   \
  X(optimizer_step, (float* w, const float* grad, float lr, int64_t n), (w, grad, lr))        \
  X(momentum_step, (float* w, float* m, const float* grad, float lr, int64_t n), (w, m, grad, lr)) \
  X(count_steps, (int64_t* counter, int64_t n), (counter))

// Kernels written by hand on each side: X(name, (parameters)).
//   compute_spin: runs for ns nanoseconds (GPU: spins on %globaltimer; CPU: sleeps).
//   hang_forever: waits for *flag != 0, which nobody ever sets (fault injection).
#define TRAINSIM_SPECIAL_KERNELS(X) \
  X(compute_spin, (int64_t ns))     \
  X(hang_forever, (const int* flag))

#define TRAINSIM_UNPAREN(...) __VA_ARGS__

#endif  // TRAINSIM_KERNEL_LIST_H_

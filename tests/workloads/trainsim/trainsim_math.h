// The arithmetic of trainsim: one definition, compiled by nvcc into the GPU kernels, by g++
// into the CPU kernel bodies gpusim runs, and by g++ into trainsim_reference.
//
// Why the numbers look the way they do: data-parallel replicas must end bit-identical, and
// equal to a one-process reference, whatever order a collective sums in. So every value a
// kernel stores is an integer-valued float, and the only floating-point operations whose
// inputs come from a collective are sums of such integers below 2^24 (exact in any order) and
// multiplications by a per-run constant (one IEEE rounding, the same on every device).
// Everything else is 32-bit unsigned integer math, which wraps mod 2^32 and is therefore exact
// mod 256. The model:
//
//   activations x[hidden], parameters w[P] per layer, values in [0, 256)
//   forward   y[a]  = sum_{k : k % hidden == a} w[k] * x[a]            (mod 256)
//             x'[a] = act(y[a], layer)                                 (a byte permutation-ish map)
//   loss      g[a]  = x_L[a] - target[a]                               (mod 256)
//   backward  dw[k] += g[k % hidden] * x[k % hidden]                   (mod 256, then summed)
//             dx[a] = act_grad(sum_{k % hidden == a} g[a] * w[k], layer)
//   update    w[k]  = w[k] - floor(lr * (sum over dp and micro-batches of dw[k]) / (dp * mb))
//             (--optimizer momentum: m[k] = floor(m[k] / 2) + that floor(...), w[k] -= m[k],
//             both mod 256: the momentum buffer m is per-parameter optimizer state)
//
// A tensor-parallel shard j of a layer holds w[j*S .. (j+1)*S) and produces the partial sum
// over its k, reduced mod 256; the tp all-reduce adds the partials (each < 256) and the next
// kernel reduces mod 256 again, which equals the unsharded sum mod 256. Hence the result does
// not depend on tp, pp, or on how the global batch (dp * micro-batches) is split between data
// parallelism and micro-batches: tests check those invariants.
#ifndef TRAINSIM_MATH_H_
#define TRAINSIM_MATH_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define TS_HD __host__ __device__
#else
#define TS_HD
#endif

namespace trainsim {

// The largest global batch (dp * micro-batches) for which the gradient sum stays below 2^24:
// 255 * 65536 < 2^24.
inline constexpr int64_t kMaxGlobalBatch = 65536;
// Learning rate, a power of two so lr * g is exact.
inline constexpr float kLearningRate = 0.25f;

// splitmix64's finalizer: a bijective mix, identical on every device.
TS_HD inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

TS_HD inline uint64_t Key(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return Mix64(Mix64(Mix64(Mix64(seed) ^ a) ^ b) ^ c);
}

// Key domains, so parameters, inputs and targets never share a stream of values.
inline constexpr uint64_t kDomainParams = 1;
inline constexpr uint64_t kDomainInput = 2;
inline constexpr uint64_t kDomainTarget = 3;

// Keys of a parameter vector (global layer index) and of a global micro-batch's input and
// target: micro-batch m of data-parallel replica d is global micro-batch d * mb + m.
inline uint64_t ParamKey(uint64_t seed, int64_t layer) {
  return Key(seed, kDomainParams, static_cast<uint64_t>(layer));
}
inline uint64_t InputKey(uint64_t seed, int64_t step, int64_t global_mb) {
  return Key(seed, kDomainInput, static_cast<uint64_t>(step), static_cast<uint64_t>(global_mb));
}
inline uint64_t TargetKey(uint64_t seed, int64_t step, int64_t global_mb) {
  return Key(seed, kDomainTarget, static_cast<uint64_t>(step), static_cast<uint64_t>(global_mb));
}

// A pseudo-random byte value for index i of the stream named by key.
TS_HD inline float ByteValue(uint64_t key, int64_t i) {
  return static_cast<float>(Mix64(key + static_cast<uint64_t>(i) * 0xD6E8FEB86659FD93ull) & 255u);
}

// An integer-valued float in [0, 2^24) as an unsigned integer (exact).
TS_HD inline uint32_t U(float v) { return static_cast<uint32_t>(v); }
TS_HD inline float Byte(uint32_t v) { return static_cast<float>(v & 255u); }

// The nonlinearities: any function of the value mod 256 keeps the tp invariance.
TS_HD inline float Activation(float y, int64_t layer) {
  const uint32_t u = U(y) & 255u;
  return Byte(u * 37u + (u >> 3) + static_cast<uint32_t>(layer) * 13u + 1u);
}
TS_HD inline float ActivationGrad(float s, int64_t layer) {
  const uint32_t u = U(s) & 255u;
  return Byte(u * 29u + (u >> 2) + static_cast<uint32_t>(layer) * 7u + 3u);
}

// Index of the first element of a shard [offset, offset + len) that maps to activation a.
TS_HD inline int64_t FirstTerm(int64_t a, int64_t shard_offset, int64_t hidden) {
  return ((a - shard_offset % hidden) % hidden + hidden) % hidden;
}

// ---- Element functions: kernel `name` runs name_at(i, args...) for i in [0, n). ----

TS_HD inline void fill_at(int64_t i, float* x, float value) { x[i] = value; }

// w[i] of a shard starting at `offset` in its layer's full parameter vector.
TS_HD inline void init_params_at(int64_t i, float* w, uint64_t key, int64_t offset) {
  w[i] = ByteValue(key, offset + i);
}

TS_HD inline void load_batch_at(int64_t i, float* x, uint64_t key) { x[i] = ByteValue(key, i); }

// part[a] = sum over this shard's k with k % hidden == a of w[k] * x[a], mod 256.
TS_HD inline void forward_partial_at(int64_t a, const float* w, const float* x, float* part,
                                     int64_t shard_offset, int64_t shard_len, int64_t hidden) {
  const uint32_t xa = U(x[a]);
  uint32_t acc = 0;
  for (int64_t k = FirstTerm(a, shard_offset, hidden); k < shard_len; k += hidden) {
    acc += U(w[k]) * xa;
  }
  part[a] = Byte(acc);
}

// y (the tp-summed partials) -> the layer's output activation.
TS_HD inline void forward_finish_at(int64_t a, const float* y, float* x_out, int64_t layer) {
  x_out[a] = Activation(y[a], layer);
}

TS_HD inline void loss_grad_at(int64_t a, const float* x, float* g, uint64_t target_key) {
  g[a] = Byte(U(x[a]) - U(ByteValue(target_key, a)));
}

// grad[i] += g[a] * x[a] mod 256, for the shard's element i (k = shard_offset + i).
TS_HD inline void backward_params_at(int64_t i, const float* x, const float* g, float* grad,
                                     int64_t shard_offset, int64_t hidden) {
  const int64_t a = (shard_offset + i) % hidden;
  grad[i] = grad[i] + Byte(U(g[a]) * U(x[a]));
}

// part[a] = sum over this shard's k with k % hidden == a of g[a] * w[k], mod 256.
TS_HD inline void backward_input_at(int64_t a, const float* w, const float* g, float* part,
                                    int64_t shard_offset, int64_t shard_len, int64_t hidden) {
  const uint32_t ga = U(g[a]);
  uint32_t acc = 0;
  for (int64_t k = FirstTerm(a, shard_offset, hidden); k < shard_len; k += hidden) {
    acc += U(w[k]) * ga;
  }
  part[a] = Byte(acc);
}

TS_HD inline void backward_finish_at(int64_t a, const float* s, float* g_out, int64_t layer) {
  g_out[a] = ActivationGrad(s[a], layer);
}

// The average over the global batch: factor = 1 / (dp * micro-batches), exact for powers of
// two and one deterministic rounding otherwise.
TS_HD inline void scale_at(int64_t i, float* x, float factor) { x[i] = x[i] * factor; }

TS_HD inline void optimizer_step_at(int64_t i, float* w, const float* grad, float lr) {
  const uint32_t step = static_cast<uint32_t>(grad[i] * lr);  // >= 0: truncation is floor
  w[i] = Byte(U(w[i]) - step);
}

// SGD with momentum on the byte grid: m holds the optimizer's per-parameter state (what a
// distributed optimizer shards over data-parallel ranks); halving is the momentum's decay.
TS_HD inline void momentum_step_at(int64_t i, float* w, float* m, const float* grad, float lr) {
  const uint32_t step = static_cast<uint32_t>(grad[i] * lr);  // >= 0: truncation is floor
  const uint32_t mi = ((U(m[i]) >> 1) + step) & 255u;
  m[i] = static_cast<float>(mi);
  w[i] = Byte(U(w[i]) - mi);
}

// The optimizer's own state: how many updates it applied (one element). Checkpointed with the
// parameters, so a restore that brought back the parameters of one step and the counter of
// another shows at the end; it never enters the parameters' arithmetic.
TS_HD inline void count_steps_at(int64_t i, int64_t* counter) { counter[i] += 1; }

// ---- Host-only helpers ----

// The factor scale_at applies to the summed gradients: one over the global batch.
inline float AverageFactor(int64_t global_batch) { return 1.0f / static_cast<float>(global_batch); }

// FNV-1a 64 over bytes: the checksum trainsim prints.
inline uint64_t Fnv1a64(const void* data, size_t len, uint64_t h = 0xCBF29CE484222325ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace trainsim

#endif  // TRAINSIM_MATH_H_

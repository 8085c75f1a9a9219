// CPU bodies for the kernels of the gpusim_cudart tests and probes, loaded through
// GPUSIM_KERNEL_LIBS. Each body runs the whole grid on the stream's worker thread.
#include <cstdint>
#include <cstring>

#include "gpusim/kernels.h"

namespace {

uint64_t Threads(const gpusim_launch* l) {
  return uint64_t{l->grid.x} * l->grid.y * l->grid.z * l->block.x * l->block.y * l->block.z;
}

// addone(float* x, int n): x[i] += 1 for every i < n covered by the grid.
void AddOne(const gpusim_launch* l, void** args) {
  float* x = *static_cast<float**>(args[0]);
  int n = *static_cast<int*>(args[1]);
  for (uint64_t i = 0; i < Threads(l) && i < static_cast<uint64_t>(n); ++i) x[i] += 1.0f;
}

// ns::scale<T>(T* x, T a, int n) for T = float: x[i] *= a.
void ScaleFloat(const gpusim_launch* l, void** args) {
  float* x = *static_cast<float**>(args[0]);
  float a = *static_cast<float*>(args[1]);
  int n = *static_cast<int*>(args[2]);
  for (uint64_t i = 0; i < Threads(l) && i < static_cast<uint64_t>(n); ++i) x[i] *= a;
}

// fill(int* out, int value, int n) (registered by its mangled name): out[i] = value; also
// records the launch geometry and stream in out[n..n+3] so tests can check what the body saw.
void Fill(const gpusim_launch* l, void** args) {
  int* out = *static_cast<int**>(args[0]);
  int value = *static_cast<int*>(args[1]);
  int n = *static_cast<int*>(args[2]);
  for (int i = 0; i < n; ++i) out[i] = value;
  out[n] = static_cast<int>(l->grid.x);
  out[n + 1] = static_cast<int>(l->block.x);
  out[n + 2] = static_cast<int>(l->shared_mem_bytes);
  std::memcpy(&out[n + 3], &l->stream, sizeof(void*));
}

// bump(int* counter): ++*counter, then overwrites its own argument copy, which must not leak
// into a later replay of a graph.
void Bump(const gpusim_launch*, void** args) {
  int** p = static_cast<int**>(args[0]);
  ++**p;
  *p = nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void gpusim_register_kernels(
    gpusim_register_fn reg) {
  const size_t add_one[] = {sizeof(float*), sizeof(int)};
  reg("addone", AddOne, add_one, 2);
  const size_t scale[] = {sizeof(float*), sizeof(float), sizeof(int)};
  reg("ns::scale", ScaleFloat, scale, 3);
  const size_t fill[] = {sizeof(int*), sizeof(int), sizeof(int)};
  reg("_Z4fillPiii", Fill, fill, 3);
  const size_t bump[] = {sizeof(int*)};
  reg("bump", Bump, bump, 1);
}

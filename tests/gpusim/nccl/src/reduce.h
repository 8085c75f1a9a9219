// Element types and reduction operators. The reduction of n inputs always runs in rank order
// 0..n-1 with one accumulator per element, so every member computes bit-identical results.
// fp16/bf16 accumulate in float and round once at the end (round to nearest even); avg is the
// sum divided by n (integer division for integer types); PreMulSum multiplies each input by the
// scalar before summing.
#ifndef GPUSIM_NCCL_REDUCE_H_
#define GPUSIM_NCCL_REDUCE_H_

#include <nccl.h>

#include <cstddef>
#include <cstdint>

namespace gpusim::nccl {

// Bytes per element; 0 for types the stand-in does not support (fp8) or invalid values.
size_t TypeSize(ncclDataType_t t);
const char* TypeName(ncclDataType_t t);

enum class RedKind : uint8_t { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };

struct RedOpSpec {
  RedKind kind = RedKind::kSum;
  int nranks = 1;  // divisor of kAvg
  // kPreMulSum: the scalar, either captured at creation (immediate) or read at execution
  // from `scalar_ptr` (ncclScalarDevice: device memory is host memory here).
  bool scalar_immediate = true;
  unsigned char scalar[8] = {};
  const void* scalar_ptr = nullptr;
};

// dst[i] = reduce(srcs[0][i], ..., srcs[n-1][i]) for i < count. dst may alias srcs[k] only if
// it is exactly equal (element-wise in-place).
void ReduceInto(void* dst, const void* const* srcs, int n, size_t count, ncclDataType_t type,
                const RedOpSpec& op);

}  // namespace gpusim::nccl

#endif  // GPUSIM_NCCL_REDUCE_H_

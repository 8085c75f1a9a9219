// Test-side model of element types and reductions, written independently of the library:
// conversions come from the CUDA headers (__float2half_rn, __float2bfloat16_rn).
#ifndef GPUSIM_NCCL_TESTS_REFERENCE_H_
#define GPUSIM_NCCL_TESTS_REFERENCE_H_

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpusim_test {

size_t ElemSize(ncclDataType_t t);
const char* TypeStr(ncclDataType_t t);
const char* OpStr(ncclRedOp_t op);
bool IsFloat(ncclDataType_t t);

// The input value element i of rank r contributes (exactly representable in every type).
double InputValue(ncclDataType_t t, ncclRedOp_t op, int rank, size_t i);
// Writes v as type t at p[i].
void Store(ncclDataType_t t, void* p, size_t i, double v);
// Reads p[i] as its exact double value.
double Load(ncclDataType_t t, const void* p, size_t i);

// reduce_{r=0..n-1} InputValue(t, op, r, i) as the library must compute it, stored into
// out[i] for i < count (out has room for count elements of t).
void ReferenceReduce(ncclDataType_t t, ncclRedOp_t op, int n, size_t first, size_t count,
                     void* out);
// Fills buf[i] for i < count with InputValue(t, op, rank, first + i).
void FillInput(ncclDataType_t t, ncclRedOp_t op, int rank, size_t first, size_t count, void* buf);

// Byte comparison; on mismatch describes the first differing element.
bool SameElements(ncclDataType_t t, const void* got, const void* want, size_t count,
                  std::string* why);

}  // namespace gpusim_test

#endif  // GPUSIM_NCCL_TESTS_REFERENCE_H_

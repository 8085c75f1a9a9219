#include "reference.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

namespace gpusim_test {

size_t ElemSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* TypeStr(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "fp16";
    case ncclFloat32: return "fp32";
    case ncclFloat64: return "fp64";
    case ncclBfloat16: return "bf16";
    default: return "?";
  }
}

const char* OpStr(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";
  }
}

bool IsFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}

namespace {
bool IsSigned(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }
}  // namespace

double InputValue(ncclDataType_t t, ncclRedOp_t op, int rank, size_t i) {
  const uint64_t h = (static_cast<uint64_t>(rank) * 2654435761u + i * 40503u + 17) % 1000003;
  if (op == ncclProd) {
    // Products of up to 8 factors stay small: floats near 1, integers in {1, 2, -1}.
    if (IsFloat(t)) return 1.0 + static_cast<double>(h % 5) * 0.125;
    if (IsSigned(t)) return (h % 3 == 2) ? -1.0 : static_cast<double>(1 + h % 2);
    return static_cast<double>(1 + h % 2);
  }
  if (IsFloat(t)) {
    // Multiples of 1/4 in [-12, 12]: exact in every float type, sums exact in float; the
    // final rounding to fp16/bf16 is still exercised (bf16 sums, avg).
    return static_cast<double>(static_cast<int64_t>(h % 97) - 48) * 0.25;
  }
  if (IsSigned(t)) return static_cast<double>(static_cast<int64_t>(h % 21) - 10);
  return static_cast<double>(h % 21);
}

void Store(ncclDataType_t t, void* p, size_t i, double v) {
  char* b = static_cast<char*>(p) + i * ElemSize(t);
  switch (t) {
    case ncclInt8: { int8_t x = static_cast<int8_t>(static_cast<int64_t>(v)); std::memcpy(b, &x, 1); break; }
    case ncclUint8: { uint8_t x = static_cast<uint8_t>(static_cast<int64_t>(v)); std::memcpy(b, &x, 1); break; }
    case ncclInt32: { int32_t x = static_cast<int32_t>(static_cast<int64_t>(v)); std::memcpy(b, &x, 4); break; }
    case ncclUint32: { uint32_t x = static_cast<uint32_t>(static_cast<int64_t>(v)); std::memcpy(b, &x, 4); break; }
    case ncclInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(b, &x, 8); break; }
    case ncclUint64: { uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(v)); std::memcpy(b, &x, 8); break; }
    case ncclFloat16: { __half x = __float2half_rn(static_cast<float>(v)); std::memcpy(b, &x, 2); break; }
    case ncclBfloat16: { __nv_bfloat16 x = __float2bfloat16_rn(static_cast<float>(v)); std::memcpy(b, &x, 2); break; }
    case ncclFloat32: { float x = static_cast<float>(v); std::memcpy(b, &x, 4); break; }
    case ncclFloat64: { std::memcpy(b, &v, 8); break; }
    default: break;
  }
}

double Load(ncclDataType_t t, const void* p, size_t i) {
  const char* b = static_cast<const char*>(p) + i * ElemSize(t);
  switch (t) {
    case ncclInt8: { int8_t x; std::memcpy(&x, b, 1); return x; }
    case ncclUint8: { uint8_t x; std::memcpy(&x, b, 1); return x; }
    case ncclInt32: { int32_t x; std::memcpy(&x, b, 4); return x; }
    case ncclUint32: { uint32_t x; std::memcpy(&x, b, 4); return x; }
    case ncclInt64: { int64_t x; std::memcpy(&x, b, 8); return static_cast<double>(x); }
    case ncclUint64: { uint64_t x; std::memcpy(&x, b, 8); return static_cast<double>(x); }
    case ncclFloat16: { __half x; std::memcpy(&x, b, 2); return __half2float(x); }
    case ncclBfloat16: { __nv_bfloat16 x; std::memcpy(&x, b, 2); return __bfloat162float(x); }
    case ncclFloat32: { float x; std::memcpy(&x, b, 4); return x; }
    case ncclFloat64: { double x; std::memcpy(&x, b, 8); return x; }
    default: return 0;
  }
}

void FillInput(ncclDataType_t t, ncclRedOp_t op, int rank, size_t first, size_t count, void* buf) {
  for (size_t i = 0; i < count; ++i) Store(t, buf, i, InputValue(t, op, rank, first + i));
}

void ReferenceReduce(ncclDataType_t t, ncclRedOp_t op, int n, size_t first, size_t count,
                     void* out) {
  for (size_t i = 0; i < count; ++i) {
    if (!IsFloat(t)) {
      // Integer types: exact arithmetic, then the type's width (inputs keep it in range).
      int64_t acc = static_cast<int64_t>(InputValue(t, op, 0, first + i));
      for (int r = 1; r < n; ++r) {
        int64_t v = static_cast<int64_t>(InputValue(t, op, r, first + i));
        switch (op) {
          case ncclSum: case ncclAvg: acc += v; break;
          case ncclProd: acc *= v; break;
          case ncclMax: acc = v > acc ? v : acc; break;
          case ncclMin: acc = v < acc ? v : acc; break;
          default: break;
        }
      }
      if (op == ncclAvg) acc /= n;
      Store(t, out, i, static_cast<double>(acc));
      continue;
    }
    // Floating types: the inputs as stored, accumulated in rank order in float (double for
    // fp64), one rounding at the end for fp16/bf16.
    std::vector<char> one(8);
    auto in = [&](int r) {
      Store(t, one.data(), 0, InputValue(t, op, r, first + i));
      return Load(t, one.data(), 0);
    };
    if (t == ncclFloat64) {
      double acc = in(0);
      for (int r = 1; r < n; ++r) {
        double v = in(r);
        switch (op) {
          case ncclSum: case ncclAvg: acc += v; break;
          case ncclProd: acc *= v; break;
          case ncclMax: acc = acc < v ? v : acc; break;
          case ncclMin: acc = v < acc ? v : acc; break;
          default: break;
        }
      }
      if (op == ncclAvg) acc /= n;
      Store(t, out, i, acc);
    } else {
      float acc = static_cast<float>(in(0));
      for (int r = 1; r < n; ++r) {
        float v = static_cast<float>(in(r));
        switch (op) {
          case ncclSum: case ncclAvg: acc += v; break;
          case ncclProd: acc *= v; break;
          case ncclMax: acc = acc < v ? v : acc; break;
          case ncclMin: acc = v < acc ? v : acc; break;
          default: break;
        }
      }
      if (op == ncclAvg) acc /= static_cast<float>(n);
      Store(t, out, i, acc);
    }
  }
}

bool SameElements(ncclDataType_t t, const void* got, const void* want, size_t count,
                  std::string* why) {
  const size_t es = ElemSize(t);
  if (std::memcmp(got, want, count * es) == 0) return true;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(static_cast<const char*>(got) + i * es, static_cast<const char*>(want) + i * es,
                    es) != 0) {
      *why = "element " + std::to_string(i) + " of " + std::to_string(count) + ": got " +
             std::to_string(Load(t, got, i)) + ", want " + std::to_string(Load(t, want, i));
      break;
    }
  }
  return false;
}

}  // namespace gpusim_test

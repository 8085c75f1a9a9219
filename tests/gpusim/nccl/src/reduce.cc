#include "reduce.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "half.h"

namespace gpusim::nccl {

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* TypeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "float8e4m3";
    case ncclFloat8e5m2: return "float8e5m2";
    default: return "invalid";
  }
}

namespace {

// Storage type S, accumulator type A, and the conversions between them. Integers accumulate
// in their unsigned counterpart so overflow wraps (defined) like on the GPU.
template <class S>
struct IntTraits {
  using Store = S;
  using Acc = std::make_unsigned_t<S>;
  static Acc Load(const void* p, size_t i) {
    S v;
    std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(S), sizeof(S));
    return static_cast<Acc>(v);
  }
  static void Put(void* p, size_t i, Acc a) {
    S v = static_cast<S>(a);
    std::memcpy(static_cast<char*>(p) + i * sizeof(S), &v, sizeof(S));
  }
  static Acc Max(Acc a, Acc b) { return static_cast<S>(a) < static_cast<S>(b) ? b : a; }
  static Acc Min(Acc a, Acc b) { return static_cast<S>(b) < static_cast<S>(a) ? b : a; }
  static Acc Div(Acc a, int n) { return static_cast<Acc>(static_cast<S>(static_cast<S>(a) / static_cast<S>(n))); }
  static Acc Scalar(const unsigned char* s) {
    S v;
    std::memcpy(&v, s, sizeof(S));
    return static_cast<Acc>(v);
  }
};

template <class F>
struct FloatTraits {
  using Store = F;
  using Acc = F;
  static Acc Load(const void* p, size_t i) {
    F v;
    std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(F), sizeof(F));
    return v;
  }
  static void Put(void* p, size_t i, Acc a) {
    std::memcpy(static_cast<char*>(p) + i * sizeof(F), &a, sizeof(F));
  }
  static Acc Max(Acc a, Acc b) { return a < b ? b : a; }
  static Acc Min(Acc a, Acc b) { return b < a ? b : a; }
  static Acc Div(Acc a, int n) { return a / static_cast<Acc>(n); }
  static Acc Scalar(const unsigned char* s) {
    F v;
    std::memcpy(&v, s, sizeof(F));
    return v;
  }
};

template <uint16_t (*ToBits)(float), float (*FromBits)(uint16_t)>
struct Half16Traits {
  using Store = uint16_t;
  using Acc = float;
  static Acc Load(const void* p, size_t i) {
    uint16_t v;
    std::memcpy(&v, static_cast<const char*>(p) + i * 2, 2);
    return FromBits(v);
  }
  static void Put(void* p, size_t i, Acc a) {
    uint16_t v = ToBits(a);
    std::memcpy(static_cast<char*>(p) + i * 2, &v, 2);
  }
  static Acc Max(Acc a, Acc b) { return a < b ? b : a; }
  static Acc Min(Acc a, Acc b) { return b < a ? b : a; }
  static Acc Div(Acc a, int n) { return a / static_cast<float>(n); }
  static Acc Scalar(const unsigned char* s) {
    uint16_t v;
    std::memcpy(&v, s, 2);
    return FromBits(v);
  }
};
using HalfTraits = Half16Traits<FloatToHalf, HalfToFloat>;
using Bf16Traits = Half16Traits<FloatToBf16, Bf16ToFloat>;

constexpr size_t kBlock = 512;

template <class T>
void ReduceTyped(void* dst, const void* const* srcs, int n, size_t count, const RedOpSpec& op) {
  using Acc = typename T::Acc;
  Acc scalar{};
  if (op.kind == RedKind::kPreMulSum) {
    unsigned char s[8];
    if (op.scalar_immediate || op.scalar_ptr == nullptr) {
      std::memcpy(s, op.scalar, sizeof s);
    } else {
      std::memcpy(s, op.scalar_ptr, sizeof(typename T::Store));
    }
    scalar = T::Scalar(s);
  }
  Acc acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t m = std::min(kBlock, count - base);
    for (size_t i = 0; i < m; ++i) acc[i] = T::Load(srcs[0], base + i);
    if (op.kind == RedKind::kPreMulSum) {
      for (size_t i = 0; i < m; ++i) acc[i] = static_cast<Acc>(acc[i] * scalar);
    }
    for (int k = 1; k < n; ++k) {
      const void* s = srcs[k];
      switch (op.kind) {
        case RedKind::kSum:
        case RedKind::kAvg:
          for (size_t i = 0; i < m; ++i) acc[i] = static_cast<Acc>(acc[i] + T::Load(s, base + i));
          break;
        case RedKind::kPreMulSum:
          for (size_t i = 0; i < m; ++i) {
            acc[i] = static_cast<Acc>(acc[i] + static_cast<Acc>(T::Load(s, base + i) * scalar));
          }
          break;
        case RedKind::kProd:
          for (size_t i = 0; i < m; ++i) acc[i] = static_cast<Acc>(acc[i] * T::Load(s, base + i));
          break;
        case RedKind::kMax:
          for (size_t i = 0; i < m; ++i) acc[i] = T::Max(acc[i], T::Load(s, base + i));
          break;
        case RedKind::kMin:
          for (size_t i = 0; i < m; ++i) acc[i] = T::Min(acc[i], T::Load(s, base + i));
          break;
      }
    }
    if (op.kind == RedKind::kAvg) {
      for (size_t i = 0; i < m; ++i) acc[i] = T::Div(acc[i], op.nranks);
    }
    for (size_t i = 0; i < m; ++i) T::Put(dst, base + i, acc[i]);
  }
}

}  // namespace

void ReduceInto(void* dst, const void* const* srcs, int n, size_t count, ncclDataType_t type,
                const RedOpSpec& op) {
  switch (type) {
    case ncclInt8: return ReduceTyped<IntTraits<int8_t>>(dst, srcs, n, count, op);
    case ncclUint8: return ReduceTyped<IntTraits<uint8_t>>(dst, srcs, n, count, op);
    case ncclInt32: return ReduceTyped<IntTraits<int32_t>>(dst, srcs, n, count, op);
    case ncclUint32: return ReduceTyped<IntTraits<uint32_t>>(dst, srcs, n, count, op);
    case ncclInt64: return ReduceTyped<IntTraits<int64_t>>(dst, srcs, n, count, op);
    case ncclUint64: return ReduceTyped<IntTraits<uint64_t>>(dst, srcs, n, count, op);
    case ncclFloat16: return ReduceTyped<HalfTraits>(dst, srcs, n, count, op);
    case ncclFloat32: return ReduceTyped<FloatTraits<float>>(dst, srcs, n, count, op);
    case ncclFloat64: return ReduceTyped<FloatTraits<double>>(dst, srcs, n, count, op);
    case ncclBfloat16: return ReduceTyped<Bf16Traits>(dst, srcs, n, count, op);
    default: return;
  }
}

}  // namespace gpusim::nccl

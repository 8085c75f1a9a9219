#include "jitckpt/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/hex.h"
#include "common/names.h"
#include "jitckpt/checksum_simd.h"

namespace ft::ckpt {

namespace internal {

bool ChecksumVectorAvailable(ChecksumVector v) {
  switch (v) {
    case ChecksumVector::kBaseline: return true;
#if FT_CHECKSUM_X86_DISPATCH
    case ChecksumVector::kAvx2: return __builtin_cpu_supports("avx2");
    case ChecksumVector::kAvx512: return __builtin_cpu_supports("avx512f");
#else
    case ChecksumVector::kAvx2:
    case ChecksumVector::kAvx512: return false;
#endif
  }
  return false;
}

uint64_t ChecksumWith(ChecksumVector v, const void* data, size_t bytes) {
  switch (v) {
#if FT_CHECKSUM_X86_DISPATCH
    case ChecksumVector::kAvx2: return ChecksumAvx2(data, bytes);
    case ChecksumVector::kAvx512: return ChecksumAvx512(data, bytes);
#endif
    default: return XXH3_64bits(data, bytes);
  }
}

ChecksumVector ChecksumVectorInUse() {
  // xxHash's own dispatcher's order: the widest unit the CPU has.
  static const ChecksumVector chosen = [] {
#if FT_CHECKSUM_X86_DISPATCH
    __builtin_cpu_init();  // may run before libgcc's own constructor (another library's initializer)
#endif
    if (ChecksumVectorAvailable(ChecksumVector::kAvx512)) return ChecksumVector::kAvx512;
    if (ChecksumVectorAvailable(ChecksumVector::kAvx2)) return ChecksumVector::kAvx2;
    return ChecksumVector::kBaseline;
  }();
  return chosen;
}

namespace {
constexpr Named<ChecksumVector> kChecksumVectorNames[] = {
    {ChecksumVector::kBaseline, "baseline"}, {ChecksumVector::kAvx2, "avx2"},
    {ChecksumVector::kAvx512, "avx512"}};
static_assert(NamesAreUnique(kChecksumVectorNames));
}  // namespace

const char* ChecksumVectorName(ChecksumVector v) { return NameIn(kChecksumVectorNames, v); }

}  // namespace internal

uint64_t Checksum(const void* data, size_t bytes) {
  return internal::ChecksumWith(internal::ChecksumVectorInUse(), data, bytes);
}

std::string DigestHex(uint64_t digest) { return Hex64(digest); }

// Lower case only: a digest has exactly one spelling.
bool ParseDigest(std::string_view hex, uint64_t* digest) { return ParseHex64(hex, digest, HexCase::kLowerOnly); }

}  // namespace ft::ckpt

// libft-internal: XXH3-64 built for each x86 vector unit, one translation unit each (compiled
// with -mavx2 / -mavx512f alone, so no other code of the build may use those instructions);
// Checksum() picks one at run time by what the CPU offers, as xxHash's own x86 dispatcher does.
// Every variant computes the same function, bit for bit: a copy checksummed on one host
// verifies on any other.
#ifndef FT_JITCKPT_CHECKSUM_SIMD_H_
#define FT_JITCKPT_CHECKSUM_SIMD_H_

#include <cstddef>
#include <cstdint>

namespace ft::ckpt::internal {

enum class ChecksumVector : uint8_t { kBaseline, kAvx2, kAvx512 };

uint64_t ChecksumAvx2(const void* data, size_t bytes);
uint64_t ChecksumAvx512(const void* data, size_t bytes);

// Whether this build and this CPU can run `v` (kBaseline: always).
bool ChecksumVectorAvailable(ChecksumVector v);
// The checksum computed with `v`, which must be available (tests compare the variants).
uint64_t ChecksumWith(ChecksumVector v, const void* data, size_t bytes);
// The one Checksum() uses: the widest available.
ChecksumVector ChecksumVectorInUse();
const char* ChecksumVectorName(ChecksumVector v);

}  // namespace ft::ckpt::internal

#endif  // FT_JITCKPT_CHECKSUM_SIMD_H_

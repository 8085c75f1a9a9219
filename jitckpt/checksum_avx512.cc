// XXH3-64 for AVX512: this file alone is compiled with -mavx512f (see checksum_simd.h). It holds
// nothing but the header-only xxHash, whose functions are all static here (XXH_INLINE_ALL), so
// no AVX512 code can stand in for a function another file uses.
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX512
#include <xxhash.h>

#include "jitckpt/checksum_simd.h"

namespace ft::ckpt::internal {

uint64_t ChecksumAvx512(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

}  // namespace ft::ckpt::internal

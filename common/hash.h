// The hashes ft uses, once: FNV-1a 64 (names and bytes to ids that every process and every
// build computes alike) and splitmix64 (a bijective mix of a 64-bit value). Some of
// their values cross process boundaries (communicator ids, API symbol ids in the record format,
// docs/shm-format.md), so their definitions never change. Pure functions; any thread.
#ifndef FT_COMMON_HASH_H_
#define FT_COMMON_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ft {

inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

// FNV-1a 64 of `text`, continuing from `h`. constexpr, so ids of names are compile-time
// constants.
constexpr uint64_t Fnv1a64(std::string_view text, uint64_t h = kFnv1a64Basis) {
  for (char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= kFnv1a64Prime;
  }
  return h;
}

// FNV-1a 64 of `n` bytes at `data`, continuing from `h`. (Not an overload of Fnv1a64: a string
// literal and a hash would pick this one, reading the hash as a length.)
inline uint64_t Fnv1a64Bytes(const void* data, size_t n, uint64_t h = kFnv1a64Basis) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnv1a64Prime;
  }
  return h;
}

// splitmix64's finalizer (Steele, Lea, Flood 2014): every input bit affects every output bit,
// and distinct inputs give distinct outputs. Mix64(0) is 0.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// splitmix64's output for state x: the golden-ratio increment, then the finalizer. Unlike
// Mix64, SplitMix64(0) is not 0, and small consecutive inputs (0, 1, 2) land far apart.
constexpr uint64_t SplitMix64(uint64_t x) { return Mix64(x + 0x9e3779b97f4a7c15ull); }

}  // namespace ft

#endif  // FT_COMMON_HASH_H_

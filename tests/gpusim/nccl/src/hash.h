// Communicator identities. A communicator is named by 128 bytes: the ncclUniqueId its members
// were given, or for split/shrink an id every member derives alone from its parent's.
#ifndef GPUSIM_NCCL_HASH_H_
#define GPUSIM_NCCL_HASH_H_

#include <nccl.h>

#include <cstdint>
#include <cstring>

namespace gpusim::nccl {

inline uint64_t Mix64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// FNV-1a over the bytes, then a finalizer; `seed` gives independent hash functions.
inline uint64_t Hash64(const void* data, size_t n, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull ^ Mix64(seed + 0x9e3779b97f4a7c15ull);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return Mix64(h);
}

inline uint64_t IdHash(const ncclUniqueId& id) { return Hash64(id.internal, sizeof id.internal, 0); }

// The id of a communicator made from `parent` by its `ordinal`-th split/shrink, for members of
// `color`. `tag` separates split ('S') from shrink ('K').
inline ncclUniqueId DeriveId(const ncclUniqueId& parent, uint64_t ordinal, int64_t color,
                             char tag) {
  struct {
    char parent[NCCL_UNIQUE_ID_BYTES];
    uint64_t ordinal;
    int64_t color;
    char tag;
  } in;
  std::memset(&in, 0, sizeof in);
  std::memcpy(in.parent, parent.internal, sizeof in.parent);
  in.ordinal = ordinal;
  in.color = color;
  in.tag = tag;
  ncclUniqueId out;
  for (size_t i = 0; i < sizeof out.internal / 8; ++i) {
    uint64_t w = Hash64(&in, sizeof in, i + 1);
    std::memcpy(out.internal + 8 * i, &w, 8);
  }
  return out;
}

}  // namespace gpusim::nccl

#endif  // GPUSIM_NCCL_HASH_H_

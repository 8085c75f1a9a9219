// Chunk checksums and digests of checkpoints: XXH3-64 (Debian's libxxhash), which runs at
// memory bandwidth, so checksumming a chunk as it lands costs the save almost nothing.
// Thread-safe (no state).
#ifndef FT_JITCKPT_CHECKSUM_H_
#define FT_JITCKPT_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ft::ckpt {

uint64_t Checksum(const void* data, size_t bytes);
inline uint64_t Checksum(std::span<const uint8_t> bytes) { return Checksum(bytes.data(), bytes.size()); }

// A digest as 16 lowercase hex digits (how manifests, acks, Redis and the plan file show it),
// and back; ParseDigest rejects anything else.
std::string DigestHex(uint64_t digest);
bool ParseDigest(std::string_view hex, uint64_t* digest);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_CHECKSUM_H_

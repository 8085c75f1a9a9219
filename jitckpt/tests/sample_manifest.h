// A valid manifest with real chunk checksums over a deterministic data region, for tests of
// the manifest, the arena and (through them) the readers.
#ifndef FT_JITCKPT_TESTS_SAMPLE_MANIFEST_H_
#define FT_JITCKPT_TESTS_SAMPLE_MANIFEST_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"

namespace ft::ckpt::testing {

// Fills `data` with bytes that depend on `seed` and the position.
inline void FillPattern(std::vector<uint8_t>* data, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint8_t& byte : *data) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    byte = static_cast<uint8_t>(x);
  }
}

// Buffers of these sizes ("param.0", "param.1", ...), laid out, with `data` filled and every
// chunk checksummed. Chunk size defaults small so a test has several chunks.
inline Manifest SampleManifest(std::vector<uint8_t>* data, std::vector<uint64_t> sizes = {5000, 4096, 123},
                               uint64_t chunk_bytes = 4096, uint64_t seed = 1) {
  std::vector<BufferEntry> named;
  for (size_t i = 0; i < sizes.size(); ++i) named.push_back({"param." + std::to_string(i), sizes[i], 0});
  Manifest m;
  m.job = "job-a";
  m.rank = 3;
  m.world_size = 8;
  m.tp = 1;
  m.pp = 0;
  m.dp = 1;
  m.step = 1200;
  m.created_unix_ns = 1764000000000000000ull;
  m.chunk_bytes = chunk_bytes;
  Status s = PlanLayout(named, &m.buffers, &m.data_bytes);
  if (!s.ok()) return Manifest{};
  data->assign(m.data_bytes, 0);
  std::vector<uint8_t> pattern(m.data_bytes);
  FillPattern(&pattern, seed);
  for (const BufferEntry& b : m.buffers) std::memcpy(data->data() + b.offset, pattern.data() + b.offset, b.bytes);
  for (size_t i = 0; i < m.chunk_count(); ++i) {
    m.chunk_checksums.push_back(Checksum(data->data() + m.chunk_begin(i), m.chunk_end(i) - m.chunk_begin(i)));
  }
  return m;
}

inline std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace ft::ckpt::testing

#endif  // FT_JITCKPT_TESTS_SAMPLE_MANIFEST_H_

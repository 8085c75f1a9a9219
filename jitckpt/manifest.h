// ft::ckpt::Manifest: what one rank's checkpoint copy holds — the contract between the agent
// in libft.so (writer), ftworker (persists, reports), ftmaster (compares digests) and
// ft_restore (verifies), which may be built at different times. A versioned little-endian
// binary format (docs/checkpoints.md, "Manifest"), parsed defensively: it is foreign bytes
// wherever it is read (arena, local and remote directory).
//
// Data layout: the buffers are laid out in registration order in one data region, each at an
// offset aligned to kBufferAlign; data_bytes is the end rounded up to kBufferAlign (the gaps
// are zero). The region is cut into chunks of chunk_bytes (the last may be shorter), each with
// its XXH3-64 checksum. The content digest covers what DP replicas must have equal (step,
// chunk size, buffer names/sizes/offsets, chunk checksums) and nothing that differs between
// replicas (rank, dp index, times, torn flag).
#ifndef FT_JITCKPT_MANIFEST_H_
#define FT_JITCKPT_MANIFEST_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace ft::ckpt {

// 2: flags bits 1-2 say what took the copy (SaveOrigin). A version 1 manifest reads as
// origin kUnknown.
inline constexpr uint32_t kManifestVersion = 2;
inline constexpr uint64_t kBufferAlign = 4096;
inline constexpr size_t kMaxBufferName = 255;
inline constexpr size_t kMaxJobName = 255;  // ManifestCapacity reserves this much for the job
inline constexpr uint64_t kDefaultChunkBytes = 4ull << 20;

struct BufferEntry {
  std::string name;
  uint64_t bytes = 0;
  uint64_t offset = 0;  // in the data region
  bool operator==(const BufferEntry&) const = default;
};

// What took a copy (said in the worker's report, `ftmaster checkpoints` and the verdicts).
enum class SaveOrigin : uint8_t { kUnknown = 0, kPeriodic = 1, kJustInTime = 2, kTermination = 3 };
// "periodic", "just-in-time", "termination"; "" for kUnknown.
const char* SaveOriginName(SaveOrigin origin);

struct Manifest {
  uint32_t format_version = kManifestVersion;
  std::string job;
  int32_t rank = -1;
  int32_t world_size = -1;
  int32_t tp = -1, pp = -1, dp = -1;  // -1: unknown to the app (the master's topology says)
  int64_t step = -1;                  // the application's step number
  bool torn = false;                  // saved while the state was being updated: never restored
  SaveOrigin origin = SaveOrigin::kUnknown;  // format 2; not part of the content digest
  uint64_t created_unix_ns = 0;
  uint64_t chunk_bytes = kDefaultChunkBytes;
  uint64_t data_bytes = 0;
  std::vector<BufferEntry> buffers;
  std::vector<uint64_t> chunk_checksums;  // ceil(data_bytes / chunk_bytes) of them

  size_t chunk_count() const;
  // [begin, end) of chunk i in the data region.
  uint64_t chunk_begin(size_t i) const;
  uint64_t chunk_end(size_t i) const;
  bool operator==(const Manifest&) const = default;
};

// Offsets and data_bytes for buffers of these names and sizes, in this order (the layout
// rule above). InvalidArgument on an empty or too long or duplicate name, or zero bytes.
Status PlanLayout(std::span<const BufferEntry> named_sizes, std::vector<BufferEntry>* laid_out,
                  uint64_t* data_bytes);

// The digest DP replicas compare (see above).
uint64_t ContentDigest(const Manifest& m);

// Serialized bytes; ParseManifest(EncodeManifest(m)) == m.
std::string EncodeManifest(const Manifest& m);
// An upper bound of EncodeManifest's size for this layout (the arena reserves it up front).
size_t ManifestCapacity(std::span<const BufferEntry> buffers, uint64_t data_bytes, uint64_t chunk_bytes);

// Corrupt for bytes that are not a valid manifest (bad magic, truncated, a checksum
// mismatch, counts or offsets out of range, overlapping buffers); Unsupported, naming both
// versions, for a manifest of a newer format. *out is untouched on error.
Status ParseManifest(std::span<const uint8_t> bytes, Manifest* out);

// OK when `saved` holds exactly these buffers (names and sizes, in order); else
// InvalidArgument naming the first difference ("buffer 3: saved 'opt.m' of 4096 bytes,
// registered 'opt.v' of 4096 bytes").
Status LayoutMatches(const Manifest& saved, std::span<const BufferEntry> registered);

// Checks chunk i of `data` (the whole data region) against the manifest.
bool ChunkVerifies(const Manifest& m, size_t i, const uint8_t* data);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_MANIFEST_H_

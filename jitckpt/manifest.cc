// The manifest's binary format (docs/checkpoints.md, "Manifest format"), version 2 (version 1
// is the same without the origin bits, and is read too: every shipped format has a reader in
// kFormats below):
//
//   offset  size  field
//        0     8  magic "FTCKMANI"
//        8     4  format_version
//       12     4  header_bytes (96)
//       16     8  total_bytes: the whole encoding, trailing checksum included
//       24  4 x 5 rank, world_size, tp, pp, dp (int32)
//       44     4  flags (bit 0: torn; format 2: bits 1-2 the SaveOrigin)
//       48     8  step (int64)
//       56     8  created_unix_ns
//       64     8  chunk_bytes
//       72     8  data_bytes
//       80     4  buffer_count
//       84     4  job_bytes
//       88     8  chunk_count
//       96        job (job_bytes), then per buffer: u16 name length, name, u64 bytes,
//                 u64 offset; then chunk_count u64 checksums; then the u64 XXH3-64 of
//                 everything before it.
//
// What every later version keeps, so that this build can tell "newer" from "damaged": the
// first 24 bytes and the trailing self-checksum. The checksum is checked before the version,
// so a flipped byte anywhere (the version field included) reads as Corrupt, and only an intact
// manifest of a newer format reads as Unsupported.
#include "jitckpt/manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <bit>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "jitckpt/checksum.h"

namespace ft::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the manifest is little-endian and encoded by copying native integers");

constexpr uint64_t kMagic = 0x494e414d4b435446ull;  // "FTCKMANI" read as bytes
constexpr uint32_t kHeaderBytes = 96;
constexpr uint32_t kFlagTorn = 1u;
constexpr uint32_t kOriginShift = 1;
constexpr uint32_t kOriginMask = 3u << kOriginShift;
// Smallest encoding of one buffer entry (a one-byte name) and of one checksum.
constexpr uint64_t kMinBufferEntryBytes = 2 + 1 + 8 + 8;
constexpr uint64_t kChecksumBytes = 8;
// Far beyond any host's memory and far from overflow: every sum of offsets and sizes below
// this bound is exact.
constexpr uint64_t kMaxDataBytes = 1ull << 56;

uint64_t AlignUp(uint64_t value, uint64_t align) { return (value + align - 1) / align * align; }

uint64_t ChunkCountOf(uint64_t data_bytes, uint64_t chunk_bytes) {
  if (chunk_bytes == 0) return 0;
  return data_bytes / chunk_bytes + (data_bytes % chunk_bytes != 0 ? 1 : 0);
}

class Writer {
 public:
  template <typename T>
  void Put(T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    out_.append(bytes, sizeof(T));
  }
  void PutBytes(std::string_view bytes) { out_.append(bytes); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Bounds-checked reads of foreign bytes: a read past the end fails and the reader stays
// failed, so the parser checks once per section rather than after every field.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T* value) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, std::string* value) {
    if (remaining() < n) return false;
    value->assign(reinterpret_cast<const char*>(bytes_.data() + at_), n);
    at_ += n;
    return true;
  }
  void Seek(size_t at) { at_ = at; }
  size_t at() const { return at_; }
  size_t remaining() const { return bytes_.size() - at_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

Status Damaged(std::string_view why) { return Status::Corrupt(fmt::format("manifest: {}", why)); }

// The layout rule of manifest.h for one buffer after `end` (the previous buffer's end).
Status CheckNamedSize(const BufferEntry& b, size_t index) {
  if (b.name.empty()) return Status::InvalidArgument(fmt::format("buffer {}: empty name", index));
  if (b.name.size() > kMaxBufferName) {
    return Status::InvalidArgument(fmt::format("buffer {}: name of {} bytes (at most {})", index,
                                               b.name.size(), kMaxBufferName));
  }
  if (b.bytes == 0) {
    return Status::InvalidArgument(fmt::format("buffer {} '{}': zero bytes", index, b.name));
  }
  return Status::Ok();
}

}  // namespace

size_t Manifest::chunk_count() const { return ChunkCountOf(data_bytes, chunk_bytes); }

uint64_t Manifest::chunk_begin(size_t i) const { return static_cast<uint64_t>(i) * chunk_bytes; }

uint64_t Manifest::chunk_end(size_t i) const {
  uint64_t begin = chunk_begin(i);
  if (begin >= data_bytes) return data_bytes;
  return begin + std::min(chunk_bytes, data_bytes - begin);
}

Status PlanLayout(std::span<const BufferEntry> named_sizes, std::vector<BufferEntry>* laid_out,
                  uint64_t* data_bytes) {
  std::vector<BufferEntry> result;
  result.reserve(named_sizes.size());
  std::unordered_set<std::string_view> names;
  uint64_t end = 0;
  for (size_t i = 0; i < named_sizes.size(); ++i) {
    const BufferEntry& b = named_sizes[i];
    FT_RETURN_IF_ERROR(CheckNamedSize(b, i));
    if (!names.insert(b.name).second) {
      return Status::InvalidArgument(fmt::format("buffer {}: name '{}' registered twice", i, b.name));
    }
    uint64_t offset = AlignUp(end, kBufferAlign);
    if (b.bytes > kMaxDataBytes || offset + b.bytes > kMaxDataBytes) {
      return Status::InvalidArgument(fmt::format("buffer {} '{}': {} bytes overflow the layout", i,
                                                 b.name, b.bytes));
    }
    result.push_back({b.name, b.bytes, offset});
    end = offset + b.bytes;
  }
  *data_bytes = AlignUp(end, kBufferAlign);
  *laid_out = std::move(result);
  return Status::Ok();
}

uint64_t ContentDigest(const Manifest& m) {
  // Only what DP replicas of one shard hold equal; a tag and a version first, so the digest
  // of some other structure never collides with it by construction.
  Writer w;
  w.PutBytes("ft-ckpt-content-1");
  w.Put<int64_t>(m.step);
  w.Put<uint64_t>(m.chunk_bytes);
  w.Put<uint64_t>(m.data_bytes);
  w.Put<uint64_t>(m.buffers.size());
  for (const BufferEntry& b : m.buffers) {
    w.Put<uint64_t>(b.name.size());
    w.PutBytes(b.name);
    w.Put<uint64_t>(b.bytes);
    w.Put<uint64_t>(b.offset);
  }
  w.Put<uint64_t>(m.chunk_checksums.size());
  for (uint64_t c : m.chunk_checksums) w.Put<uint64_t>(c);
  return Checksum(w.out().data(), w.out().size());
}

const char* SaveOriginName(SaveOrigin origin) {
  switch (origin) {
    case SaveOrigin::kPeriodic: return "periodic";
    case SaveOrigin::kJustInTime: return "just-in-time";
    case SaveOrigin::kTermination: return "termination";
    case SaveOrigin::kUnknown: break;
  }
  return "";
}

std::string EncodeManifest(const Manifest& m) {
  Writer w;
  w.Put<uint64_t>(kMagic);
  w.Put<uint32_t>(m.format_version);
  w.Put<uint32_t>(kHeaderBytes);
  w.Put<uint64_t>(0);  // total_bytes, patched below
  w.Put<int32_t>(m.rank);
  w.Put<int32_t>(m.world_size);
  w.Put<int32_t>(m.tp);
  w.Put<int32_t>(m.pp);
  w.Put<int32_t>(m.dp);
  uint32_t flags = m.torn ? kFlagTorn : 0u;
  if (m.format_version >= 2) flags |= (static_cast<uint32_t>(m.origin) << kOriginShift) & kOriginMask;
  w.Put<uint32_t>(flags);
  w.Put<int64_t>(m.step);
  w.Put<uint64_t>(m.created_unix_ns);
  w.Put<uint64_t>(m.chunk_bytes);
  w.Put<uint64_t>(m.data_bytes);
  w.Put<uint32_t>(static_cast<uint32_t>(m.buffers.size()));
  w.Put<uint32_t>(static_cast<uint32_t>(m.job.size()));
  w.Put<uint64_t>(m.chunk_checksums.size());
  w.PutBytes(m.job);
  for (const BufferEntry& b : m.buffers) {
    w.Put<uint16_t>(static_cast<uint16_t>(b.name.size()));
    w.PutBytes(b.name);
    w.Put<uint64_t>(b.bytes);
    w.Put<uint64_t>(b.offset);
  }
  for (uint64_t c : m.chunk_checksums) w.Put<uint64_t>(c);
  std::string& out = w.out();
  uint64_t total = out.size() + kChecksumBytes;
  std::memcpy(out.data() + 16, &total, sizeof(total));
  w.Put<uint64_t>(Checksum(out.data(), out.size()));
  return std::move(w.out());
}

size_t ManifestCapacity(std::span<const BufferEntry> buffers, uint64_t data_bytes,
                        uint64_t chunk_bytes) {
  size_t bytes = kHeaderBytes + kMaxJobName + kChecksumBytes;
  for (const BufferEntry& b : buffers) bytes += 2 + b.name.size() + 16;
  bytes += ChunkCountOf(data_bytes, chunk_bytes == 0 ? 1 : chunk_bytes) * kChecksumBytes;
  return bytes;
}

namespace {

// One format this build reads: its number, what its fixed header holds and which flag bits it
// defines, and the reader of its body (everything after the first 24 bytes, up to the
// self-checksum). Formats 1 and 2 share the body (2 only defines the origin bits), so they
// share the reader.
struct FormatReader {
  uint32_t version;
  uint32_t header_bytes;
  uint32_t known_flags;
  Status (*read_body)(const FormatReader& format, std::span<const uint8_t> body, Manifest* m);
};

// Formats 1 and 2: the 96-byte header of the table at the top of this file, then the job, the
// buffer entries and the chunk checksums. The bytes are intact as written (the self-checksum
// held); a writer of this format could still have written nonsense, so every count and offset
// is checked against the bytes present before anything is allocated.
Status ReadBodyV1(const FormatReader& format, std::span<const uint8_t> body, Manifest* out) {
  Reader b(body);
  b.Seek(24);
  Manifest m;
  m.format_version = format.version;
  uint32_t flags = 0, buffer_count = 0, job_bytes = 0;
  uint64_t chunk_count = 0;
  if (!b.Get(&m.rank) || !b.Get(&m.world_size) || !b.Get(&m.tp) || !b.Get(&m.pp) || !b.Get(&m.dp) ||
      !b.Get(&flags) || !b.Get(&m.step) || !b.Get(&m.created_unix_ns) || !b.Get(&m.chunk_bytes) ||
      !b.Get(&m.data_bytes) || !b.Get(&buffer_count) || !b.Get(&job_bytes) || !b.Get(&chunk_count)) {
    return Damaged("truncated header");
  }
  if ((flags & ~format.known_flags) != 0) {
    return Damaged(fmt::format("unknown flags {:#x} (format {} defines {:#x})", flags, format.version,
                               format.known_flags));
  }
  m.torn = (flags & kFlagTorn) != 0;
  m.origin = static_cast<SaveOrigin>((flags & kOriginMask) >> kOriginShift);  // 0 in format 1
  if (m.chunk_bytes == 0) return Damaged("chunk size 0");
  if (m.data_bytes > kMaxDataBytes) return Damaged(fmt::format("data region of {} bytes", m.data_bytes));
  if (job_bytes > kMaxJobName) {
    return Damaged(fmt::format("job name of {} bytes (at most {})", job_bytes, kMaxJobName));
  }
  if (!b.GetBytes(job_bytes, &m.job)) return Damaged("truncated job name");
  if (buffer_count > b.remaining() / kMinBufferEntryBytes) {
    return Damaged(fmt::format("{} buffers cannot fit in the {} bytes left", buffer_count, b.remaining()));
  }
  m.buffers.reserve(buffer_count);
  std::unordered_set<std::string_view> names;
  uint64_t end = 0;
  for (uint32_t i = 0; i < buffer_count; ++i) {
    uint16_t name_bytes = 0;
    BufferEntry entry;
    if (!b.Get(&name_bytes) || !b.GetBytes(name_bytes, &entry.name) || !b.Get(&entry.bytes) ||
        !b.Get(&entry.offset)) {
      return Damaged(fmt::format("buffer {} truncated", i));
    }
    Status named = CheckNamedSize(entry, i);
    if (!named.ok()) return Damaged(named.message());
    uint64_t expected = AlignUp(end, kBufferAlign);
    if (entry.offset != expected) {
      return Damaged(fmt::format("buffer {} '{}' at offset {}, the layout puts it at {} (overlap or gap)",
                                 i, entry.name, entry.offset, expected));
    }
    if (entry.bytes > m.data_bytes || entry.offset > m.data_bytes - entry.bytes) {
      return Damaged(fmt::format("buffer {} '{}' ends past the data region of {} bytes", i, entry.name,
                                 m.data_bytes));
    }
    end = entry.offset + entry.bytes;
    m.buffers.push_back(std::move(entry));
  }
  for (const BufferEntry& e : m.buffers) {
    if (!names.insert(e.name).second) return Damaged(fmt::format("buffer name '{}' twice", e.name));
  }
  if (m.data_bytes != AlignUp(end, kBufferAlign)) {
    return Damaged(fmt::format("data region of {} bytes, the buffers need {}", m.data_bytes,
                               AlignUp(end, kBufferAlign)));
  }
  if (chunk_count != ChunkCountOf(m.data_bytes, m.chunk_bytes)) {
    return Damaged(fmt::format("{} chunk checksums for {} bytes in chunks of {}", chunk_count,
                               m.data_bytes, m.chunk_bytes));
  }
  if (chunk_count != b.remaining() / kChecksumBytes || b.remaining() % kChecksumBytes != 0) {
    return Damaged(fmt::format("{} chunk checksums, {} bytes left for them", chunk_count, b.remaining()));
  }
  m.chunk_checksums.resize(chunk_count);
  for (uint64_t& c : m.chunk_checksums) b.Get(&c);
  *out = std::move(m);
  return Status::Ok();
}

// Every format ever shipped, oldest first (docs/checkpoints.md, "Manifest versions"): a reader
// keeps reading each of them. A new format adds a row, with a reader of its own when its body
// differs, and never edits the rows above; jitckpt/tests/fixtures/ holds a manifest of each
// row as its writer wrote it, which ManifestVersionsTest reads.
constexpr FormatReader kFormats[] = {
    {1, kHeaderBytes, kFlagTorn, ReadBodyV1},
    {2, kHeaderBytes, kFlagTorn | kOriginMask, ReadBodyV1},
};
constexpr bool OneReaderPerFormatInOrder() {
  for (size_t i = 0; i < std::size(kFormats); ++i) {
    if (kFormats[i].version != i + 1) return false;
  }
  return std::size(kFormats) == kManifestVersion;
}
static_assert(OneReaderPerFormatInOrder(), "kFormats[v - 1] reads format v, for every v up to kManifestVersion");

}  // namespace

Status ParseManifest(std::span<const uint8_t> bytes, Manifest* out) {
  Reader r(bytes);
  uint64_t magic = 0, total_bytes = 0;
  uint32_t version = 0, header_bytes = 0;
  if (!r.Get(&magic) || !r.Get(&version) || !r.Get(&header_bytes) || !r.Get(&total_bytes)) {
    return Damaged(fmt::format("{} bytes, shorter than any manifest", bytes.size()));
  }
  if (magic != kMagic) return Damaged("bad magic (not a manifest)");
  if (total_bytes != bytes.size()) {
    return Damaged(fmt::format("{} bytes, but its header says {} (truncated or padded)",
                               bytes.size(), total_bytes));
  }
  if (bytes.size() < 24 + kChecksumBytes) return Damaged("too short for its self-checksum");
  uint64_t stored_checksum = 0;
  std::memcpy(&stored_checksum, bytes.data() + bytes.size() - kChecksumBytes, kChecksumBytes);
  if (Checksum(bytes.data(), bytes.size() - kChecksumBytes) != stored_checksum) {
    return Damaged("self-checksum mismatch (a byte was changed)");
  }
  if (version == 0) return Damaged("format version 0");
  if (version > kManifestVersion) {
    return Status::Unsupported(fmt::format("manifest format {} is newer than this build's {}; upgrade ft",
                                           version, kManifestVersion));
  }
  const FormatReader& format = kFormats[version - 1];
  if (header_bytes != format.header_bytes) {
    return Damaged(fmt::format("header of {} bytes (format {} has {})", header_bytes, version,
                               format.header_bytes));
  }
  return format.read_body(format, bytes.first(bytes.size() - kChecksumBytes), out);
}

Status LayoutMatches(const Manifest& saved, std::span<const BufferEntry> registered) {
  size_t common = std::min(saved.buffers.size(), registered.size());
  auto describe = [](const BufferEntry& b) { return fmt::format("'{}' of {} bytes", b.name, b.bytes); };
  for (size_t i = 0; i < common; ++i) {
    const BufferEntry& s = saved.buffers[i];
    const BufferEntry& r = registered[i];
    if (s.name != r.name || s.bytes != r.bytes) {
      return Status::InvalidArgument(
          fmt::format("buffer {}: saved {}, registered {}", i, describe(s), describe(r)));
    }
  }
  if (saved.buffers.size() > common) {
    return Status::InvalidArgument(fmt::format("buffer {}: saved {}, not registered ({} saved, {} registered)",
                                               common, describe(saved.buffers[common]),
                                               saved.buffers.size(), registered.size()));
  }
  if (registered.size() > common) {
    return Status::InvalidArgument(fmt::format("buffer {}: registered {}, not saved ({} saved, {} registered)",
                                               common, describe(registered[common]),
                                               saved.buffers.size(), registered.size()));
  }
  return Status::Ok();
}

bool ChunkVerifies(const Manifest& m, size_t i, const uint8_t* data) {
  if (i >= m.chunk_count() || i >= m.chunk_checksums.size()) return false;
  uint64_t begin = m.chunk_begin(i);
  return Checksum(data + begin, m.chunk_end(i) - begin) == m.chunk_checksums[i];
}

}  // namespace ft::ckpt

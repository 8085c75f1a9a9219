#include "jitckpt/manifest.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "jitckpt/checksum.h"
#include "jitckpt/tests/sample_manifest.h"

namespace ft::ckpt {
namespace {

using testing::Bytes;
using testing::SampleManifest;

// Recomputes the trailing self-checksum after a test changed a field, so the change reaches
// the checks behind the checksum (what a buggy or hostile writer of this format could emit).
std::vector<uint8_t> Reseal(std::vector<uint8_t> bytes) {
  uint64_t sum = Checksum(bytes.data(), bytes.size() - 8);
  std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
  return bytes;
}

template <typename T>
std::vector<uint8_t> WithField(std::vector<uint8_t> bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
  return Reseal(std::move(bytes));
}

Status Parse(const std::vector<uint8_t>& bytes, Manifest* out = nullptr) {
  Manifest scratch;
  return ParseManifest(bytes, out ? out : &scratch);
}

TEST(ManifestTest, RoundTripsEveryField) {
  std::vector<uint8_t> data;
  Manifest m = SampleManifest(&data);
  ASSERT_EQ(m.buffers.size(), 3u);
  m.torn = true;
  m.tp = -1;
  std::string encoded = EncodeManifest(m);
  Manifest back;
  ASSERT_TRUE(ParseManifest(Bytes(encoded), &back).ok());
  EXPECT_EQ(back, m);
  EXPECT_LE(encoded.size(), ManifestCapacity(m.buffers, m.data_bytes, m.chunk_bytes));
}

// Pins the documented layout (docs/checkpoints.md, "Manifest format"): manifests written by one
// build are read by another, so no field may move.
TEST(ManifestTest, LayoutIsPinned) {
  std::vector<uint8_t> data;
  Manifest m = SampleManifest(&data);
  m.torn = true;
  m.origin = SaveOrigin::kTermination;
  std::string bytes = EncodeManifest(m);
  auto at = [&](size_t offset, auto value) {
    decltype(value) stored;
    std::memcpy(&stored, bytes.data() + offset, sizeof(stored));
    return stored == value;
  };
  EXPECT_EQ(bytes.substr(0, 8), "FTCKMANI");
  EXPECT_TRUE(at(8, uint32_t{2}));
  EXPECT_TRUE(at(12, uint32_t{96}));
  EXPECT_TRUE(at(16, uint64_t{bytes.size()}));
  EXPECT_TRUE(at(24, int32_t{3}));   // rank
  EXPECT_TRUE(at(28, int32_t{8}));   // world size
  EXPECT_TRUE(at(32, int32_t{1}));   // tp
  EXPECT_TRUE(at(36, int32_t{0}));   // pp
  EXPECT_TRUE(at(40, int32_t{1}));   // dp
  EXPECT_TRUE(at(44, uint32_t{1 | 3 << 1}));  // flags: torn, origin termination
  EXPECT_TRUE(at(48, int64_t{1200}));
  EXPECT_TRUE(at(56, m.created_unix_ns));
  EXPECT_TRUE(at(64, uint64_t{4096}));
  EXPECT_TRUE(at(72, uint64_t{16384}));
  EXPECT_TRUE(at(80, uint32_t{3}));
  EXPECT_TRUE(at(84, uint32_t{5}));
  EXPECT_TRUE(at(88, uint64_t{4}));
  EXPECT_EQ(bytes.substr(96, 5), "job-a");
  EXPECT_TRUE(at(101, uint16_t{7}));
  EXPECT_EQ(bytes.substr(103, 7), "param.0");
  EXPECT_TRUE(at(110, uint64_t{5000}));
  EXPECT_TRUE(at(118, uint64_t{0}));
  const size_t checksums = 96 + 5 + 3 * (2 + 7 + 16);
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(at(checksums + 8 * i, m.chunk_checksums[i])) << i;
  EXPECT_EQ(bytes.size(), checksums + 4 * 8 + 8);
  EXPECT_TRUE(at(bytes.size() - 8, Checksum(bytes.data(), bytes.size() - 8)));
}

TEST(ManifestTest, EmptyManifestRoundTrips) {
  Manifest m;
  m.job = "j";
  Manifest back;
  ASSERT_TRUE(ParseManifest(Bytes(EncodeManifest(m)), &back).ok());
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.chunk_count(), 0u);
}

TEST(ManifestTest, CapacityBoundsTheLongestJobName) {
  std::vector<uint8_t> data;
  Manifest m = SampleManifest(&data);
  m.job.assign(kMaxJobName, 'j');
  EXPECT_EQ(EncodeManifest(m).size(), ManifestCapacity(m.buffers, m.data_bytes, m.chunk_bytes));
  m.job.push_back('j');  // one past the limit: refused, not silently accepted
  EXPECT_EQ(Parse(Bytes(EncodeManifest(m))).code(), StatusCode::kCorrupt);
}

TEST(ManifestTest, ChunkBoundariesCoverTheDataRegion) {
  std::vector<uint8_t> data;
  Manifest m = SampleManifest(&data, {5000, 4096, 123}, 5000);
  ASSERT_EQ(m.data_bytes, 3u * 4096 + 4096);
  ASSERT_EQ(m.chunk_count(), 4u);  // 16384 / 5000
  EXPECT_EQ(m.chunk_begin(0), 0u);
  EXPECT_EQ(m.chunk_end(0), 5000u);
  EXPECT_EQ(m.chunk_begin(3), 15000u);
  EXPECT_EQ(m.chunk_end(3), m.data_bytes);  // the last one is shorter
}

TEST(ManifestTest, ChunkVerifiesCatchesOneFlippedByteInItsChunkOnly) {
  std::vector<uint8_t> data;
  Manifest m = SampleManifest(&data);
  for (size_t i = 0; i < m.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(m, i, data.data())) << i;
  data[4096 + 17] ^= 1;  // chunk 1
  EXPECT_TRUE(ChunkVerifies(m, 0, data.data()));
  EXPECT_FALSE(ChunkVerifies(m, 1, data.data()));
  EXPECT_TRUE(ChunkVerifies(m, 2, data.data()));
  EXPECT_FALSE(ChunkVerifies(m, m.chunk_count(), data.data()));  // no such chunk
}

TEST(ManifestTest, AFlippedByteAnywhereIsCorrupt) {
  std::vector<uint8_t> data;
  std::vector<uint8_t> valid = Bytes(EncodeManifest(SampleManifest(&data)));
  for (size_t at = 0; at < valid.size(); ++at) {
    for (uint8_t bit : {0x01, 0x80}) {
      std::vector<uint8_t> bytes = valid;
      bytes[at] ^= bit;
      Manifest out;
      out.job = "untouched";
      Status s = ParseManifest(bytes, &out);
      ASSERT_EQ(s.code(), StatusCode::kCorrupt) << "byte " << at << ": " << s.ToString();
      EXPECT_EQ(out.job, "untouched");
    }
  }
}

TEST(ManifestTest, TruncationAtEveryLengthIsCorrupt) {
  std::vector<uint8_t> data;
  std::vector<uint8_t> valid = Bytes(EncodeManifest(SampleManifest(&data)));
  for (size_t length = 0; length < valid.size(); ++length) {
    std::vector<uint8_t> bytes(valid.begin(), valid.begin() + length);
    Status s = Parse(bytes);
    ASSERT_EQ(s.code(), StatusCode::kCorrupt) << length << ": " << s.ToString();
  }
  std::vector<uint8_t> padded = valid;
  padded.push_back(0);
  EXPECT_EQ(Parse(padded).code(), StatusCode::kCorrupt);
}

// Format 2 says what took the copy; a format 1 manifest (written before) reads as unknown, and
// its flags may not carry origin bits.
TEST(ManifestTest, OriginRoundTripsAndFormatOneReadsAsUnknown) {
  std::vector<uint8_t> data;
  Manifest m = SampleManifest(&data);
  for (SaveOrigin o : {SaveOrigin::kPeriodic, SaveOrigin::kJustInTime, SaveOrigin::kTermination}) {
    m.origin = o;
    m.torn = o == SaveOrigin::kTermination;
    Manifest out;
    ASSERT_TRUE(ParseManifest(Bytes(EncodeManifest(m)), &out).ok());
    EXPECT_EQ(out.origin, o);
    EXPECT_EQ(out.torn, m.torn);
    EXPECT_EQ(ContentDigest(out), ContentDigest(Manifest(m))) << "the origin is not content";
  }
  EXPECT_STREQ(SaveOriginName(SaveOrigin::kTermination), "termination");
  EXPECT_STREQ(SaveOriginName(SaveOrigin::kUnknown), "");
  m.format_version = 1;
  Manifest v1;
  ASSERT_TRUE(ParseManifest(Bytes(EncodeManifest(m)), &v1).ok());
  EXPECT_EQ(v1.origin, SaveOrigin::kUnknown);
  EXPECT_EQ(v1.format_version, 1u);
}

TEST(ManifestTest, NewerFormatIsRefusedByName) {
  std::vector<uint8_t> data;
  Manifest m = SampleManifest(&data);
  m.format_version = 7;
  Manifest out;
  Status s = ParseManifest(Bytes(EncodeManifest(m)), &out);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_EQ(s.message(), "manifest format 7 is newer than this build's 2; upgrade ft");
  EXPECT_EQ(out, Manifest{});
  m.format_version = 0;
  EXPECT_EQ(Parse(Bytes(EncodeManifest(m))).code(), StatusCode::kCorrupt);
}

// Each structural check behind the self-checksum, reached with a resealed encoding. Offsets
// are those of the format table in manifest.cc.
TEST(ManifestTest, EveryStructuralCheckRejects) {
  std::vector<uint8_t> data;
  Manifest m = SampleManifest(&data);
  std::vector<uint8_t> valid = Bytes(EncodeManifest(m));
  ASSERT_TRUE(Parse(Reseal(valid)).ok());
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* expect;  // part of the message
  };
  const size_t job_end = 96 + m.job.size();
  const size_t buffer1 = job_end + 2 + m.buffers[0].name.size() + 16;  // entry of buffer 1
  std::vector<Case> cases = {
      {"magic", WithField<uint64_t>(valid, 0, 0x1122334455667788ull), "magic"},
      {"header size", WithField<uint32_t>(valid, 12, 64), "header of 64 bytes"},
      {"total bytes", WithField<uint64_t>(valid, 16, valid.size() + 8), "header says"},
      {"flags", WithField<uint32_t>(valid, 44, 8), "unknown flags"},
      {"chunk size 0", WithField<uint64_t>(valid, 64, 0), "chunk size 0"},
      {"data bytes", WithField<uint64_t>(valid, 72, m.data_bytes + 4096), "data region"},
      {"data too small", WithField<uint64_t>(valid, 72, 4096), "ends past the data region"},
      {"data beyond any host", WithField<uint64_t>(valid, 72, ~0ull), "data region of"},
      {"buffer count storm", WithField<uint32_t>(valid, 80, 0xffffffffu), "cannot fit"},
      {"fewer buffers", WithField<uint32_t>(valid, 80, 2), "data region"},
      {"job length", WithField<uint32_t>(valid, 84, 200), ""},
      {"job past the limit", WithField<uint32_t>(valid, 84, 100000), "job name"},
      {"chunk count", WithField<uint64_t>(valid, 88, m.chunk_checksums.size() + 1), "chunk checksums"},
      {"chunk count storm", WithField<uint64_t>(valid, 88, ~0ull), "chunk checksums"},
      {"empty name", WithField<uint16_t>(valid, job_end, 0), "empty name"},
      {"name too long", WithField<uint16_t>(valid, job_end, 300), ""},
      {"zero bytes", WithField<uint64_t>(valid, job_end + 2 + 7, 0), "zero bytes"},
      {"overlap", WithField<uint64_t>(valid, buffer1 + 2 + 7 + 8, 4096), "overlap"},
      {"gap", WithField<uint64_t>(valid, buffer1 + 2 + 7 + 8, 3 * 4096), "overlap or gap"},
      {"duplicate name", WithField<char>(valid, buffer1 + 2 + 6, '0'), "twice"},
  };
  for (const Case& c : cases) {
    Manifest out;
    out.step = 77;
    Status s = ParseManifest(c.bytes, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.expect), std::string_view::npos) << c.what << ": " << s.ToString();
    EXPECT_EQ(out.step, 77) << c.what;
  }
}

TEST(ManifestTest, PlanLayoutAlignsInOrderAndRoundsTheEnd) {
  std::vector<BufferEntry> named = {{"a", 1, 99}, {"b", 4096, 0}, {"c", 4097, 0}};
  std::vector<BufferEntry> laid;
  uint64_t data_bytes = 0;
  ASSERT_TRUE(PlanLayout(named, &laid, &data_bytes).ok());
  ASSERT_EQ(laid.size(), 3u);
  EXPECT_EQ(laid[0], (BufferEntry{"a", 1, 0}));
  EXPECT_EQ(laid[1], (BufferEntry{"b", 4096, 4096}));
  EXPECT_EQ(laid[2], (BufferEntry{"c", 4097, 8192}));
  EXPECT_EQ(data_bytes, 8192u + 8192u);
}

TEST(ManifestTest, PlanLayoutRejectsBadNamesAndSizesAndLeavesOutputsAlone) {
  struct Case {
    std::vector<BufferEntry> named;
    const char* expect;
  };
  std::vector<Case> cases = {
      {{{"", 8, 0}}, "empty name"},
      {{{std::string(kMaxBufferName + 1, 'n'), 8, 0}}, "name of 256 bytes"},
      {{{"a", 8, 0}, {"a", 8, 0}}, "registered twice"},
      {{{"a", 0, 0}}, "zero bytes"},
      {{{"a", 8, 0}, {"b", ~0ull - 100, 0}}, "overflow"},
      {{{"a", 1ull << 55, 0}, {"b", (1ull << 55) + 1, 0}}, "overflow"},
  };
  for (const Case& c : cases) {
    std::vector<BufferEntry> laid = {{"keep", 1, 1}};
    uint64_t data_bytes = 5;
    Status s = PlanLayout(c.named, &laid, &data_bytes);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.expect;
    EXPECT_NE(s.message().find(c.expect), std::string_view::npos) << s.ToString();
    EXPECT_EQ(laid.size(), 1u);
    EXPECT_EQ(data_bytes, 5u);
  }
  std::vector<BufferEntry> longest = {{std::string(kMaxBufferName, 'n'), 8, 0}};
  std::vector<BufferEntry> laid;
  uint64_t data_bytes = 0;
  EXPECT_TRUE(PlanLayout(longest, &laid, &data_bytes).ok());
}

TEST(ManifestTest, LayoutMatchesNamesTheFirstDifference) {
  std::vector<uint8_t> data;
  Manifest saved = SampleManifest(&data);
  std::vector<BufferEntry> registered = saved.buffers;
  EXPECT_TRUE(LayoutMatches(saved, registered).ok());

  registered[1].name = "opt.v";
  Status s = LayoutMatches(saved, registered);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "buffer 1: saved 'param.1' of 4096 bytes, registered 'opt.v' of 4096 bytes");

  registered = saved.buffers;
  registered[2].bytes = 124;
  EXPECT_EQ(LayoutMatches(saved, registered).message(),
            "buffer 2: saved 'param.2' of 123 bytes, registered 'param.2' of 124 bytes");

  registered = saved.buffers;
  registered.pop_back();
  EXPECT_EQ(LayoutMatches(saved, registered).message(),
            "buffer 2: saved 'param.2' of 123 bytes, not registered (3 saved, 2 registered)");

  registered = saved.buffers;
  registered.push_back({"extra", 8, 16384});
  EXPECT_EQ(LayoutMatches(saved, registered).message(),
            "buffer 3: registered 'extra' of 8 bytes, not saved (3 saved, 4 registered)");
}

TEST(ManifestTest, ContentDigestIgnoresWhatReplicasDoNotShare) {
  std::vector<uint8_t> data;
  Manifest a = SampleManifest(&data);
  Manifest b = a;
  b.rank = 7;
  b.dp = 3;
  b.created_unix_ns += 123456789;
  b.torn = true;
  EXPECT_EQ(ContentDigest(a), ContentDigest(b));
}

TEST(ManifestTest, ContentDigestChangesWithAnythingReplicasMustShare) {
  std::vector<uint8_t> data;
  const Manifest base = SampleManifest(&data);
  const uint64_t digest = ContentDigest(base);
  std::vector<std::pair<const char*, Manifest>> variants;
  for (size_t i = 0; i < base.chunk_checksums.size(); ++i) {
    Manifest m = base;
    m.chunk_checksums[i] ^= 1;
    variants.push_back({"chunk checksum", m});
  }
  Manifest m = base;
  m.buffers[0].name = "param.x";
  variants.push_back({"name", m});
  m = base;
  m.buffers[2].bytes += 1;
  variants.push_back({"size", m});
  m = base;
  m.step += 1;
  variants.push_back({"step", m});
  m = base;
  m.chunk_bytes *= 2;
  variants.push_back({"chunk size", m});
  for (const auto& [what, variant] : variants) EXPECT_NE(ContentDigest(variant), digest) << what;
}

}  // namespace
}  // namespace ft::ckpt

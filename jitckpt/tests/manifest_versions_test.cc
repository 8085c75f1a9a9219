// Every shipped manifest format, frozen as its writer wrote it (jitckpt/tests/fixtures/), read
// by today's reader field by field: a worker or a restored rank built today reads the copies
// that older builds left in arenas and directories (docs/checkpoints.md, "Manifest versions").
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"

namespace ft::ckpt {
namespace {

std::vector<uint8_t> Fixture(const std::string& name) {
  std::ifstream in(std::string(FT_MANIFEST_FIXTURES) + "/" + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// What the fixtures hold (fixtures/README.md), spelled out here rather than built by a helper
// that may change: format 1 torn, format 2 just-in-time.
Manifest Expected(uint32_t version) {
  Manifest m;
  m.format_version = version;
  m.job = "job-a";
  m.rank = 3;
  m.world_size = 8;
  m.tp = 1;
  m.pp = 0;
  m.dp = 1;
  m.step = 1200;
  m.torn = version == 1;
  m.origin = version == 1 ? SaveOrigin::kUnknown : SaveOrigin::kJustInTime;
  m.created_unix_ns = 1764000000123456789ull;
  m.chunk_bytes = 4096;
  m.data_bytes = 16384;
  m.buffers = {{"param.0", 5000, 0}, {"param.1", 4096, 8192}, {"opt.m", 123, 12288}};
  m.chunk_checksums = {0x0123456789abcdefull, 0xfedcba9876543210ull, 0x1111222233334444ull,
                       0x5555666677778888ull};
  return m;
}

std::vector<uint8_t> WithField32(std::vector<uint8_t> bytes, size_t offset, uint32_t value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(value));
  uint64_t sum = Checksum(bytes.data(), bytes.size() - 8);
  std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
  return bytes;
}

TEST(ManifestVersionsTest, EveryShippedFormatIsReadFieldByField) {
  for (uint32_t version = 1; version <= kManifestVersion; ++version) {
    std::vector<uint8_t> bytes = Fixture("manifest_v" + std::to_string(version) + ".bin");
    ASSERT_EQ(bytes.size(), 214u) << "fixture of format " << version << " missing or changed";
    Manifest m;
    Status s = ParseManifest(bytes, &m);
    ASSERT_TRUE(s.ok()) << "format " << version << ": " << s.ToString();
    EXPECT_EQ(m, Expected(version)) << "format " << version;
  }
}

// The fixtures are the bytes of the documented tables, and today's writer still writes them:
// format 2 as it writes every copy, format 1 when asked (tests of older readers use it).
TEST(ManifestVersionsTest, TodaysWriterWritesTheFrozenBytes) {
  for (uint32_t version = 1; version <= kManifestVersion; ++version) {
    std::string encoded = EncodeManifest(Expected(version));
    std::vector<uint8_t> fixture = Fixture("manifest_v" + std::to_string(version) + ".bin");
    EXPECT_EQ(std::vector<uint8_t>(encoded.begin(), encoded.end()), fixture) << "format " << version;
  }
  EXPECT_EQ(Expected(kManifestVersion).format_version, Manifest{}.format_version)
      << "a new format freezes a fixture of its own and adds it here";
}

// DP replicas saved by an older and a newer libft.so hold the same content: the digest the
// master compares must not see the format, the origin or the torn flag.
TEST(ManifestVersionsTest, ReplicasWrittenInDifferentFormatsCompareEqual) {
  Manifest v1, v2;
  ASSERT_TRUE(ParseManifest(Fixture("manifest_v1.bin"), &v1).ok());
  ASSERT_TRUE(ParseManifest(Fixture("manifest_v2.bin"), &v2).ok());
  EXPECT_EQ(ContentDigest(v1), ContentDigest(v2));
}

// A format-1 manifest has no origin bits: a writer of format 1 that set them wrote something
// else than format 1, and its bits are not read as format 2's.
TEST(ManifestVersionsTest, FormatOneFlagsAreReadAsFormatOneOnly) {
  std::vector<uint8_t> v1 = WithField32(Fixture("manifest_v1.bin"), 44, 1u | (2u << 1));
  Manifest out;
  out.step = 77;
  Status s = ParseManifest(v1, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("format 1 defines 0x1"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(out.step, 77);
  // The same flags are valid format 2.
  ASSERT_TRUE(ParseManifest(WithField32(Fixture("manifest_v2.bin"), 44, 1u | (2u << 1)), &out).ok());
  EXPECT_EQ(out.origin, SaveOrigin::kJustInTime);
  EXPECT_TRUE(out.torn);
}

// The next format, intact (its self-checksum holds), is refused naming both formats, never
// read as today's.
TEST(ManifestVersionsTest, TheNextFormatIsRefusedNamingBoth) {
  std::vector<uint8_t> next = WithField32(Fixture("manifest_v2.bin"), 8, kManifestVersion + 1);
  Manifest out;
  out.step = 77;
  Status s = ParseManifest(next, &out);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_EQ(s.message(), "manifest format " + std::to_string(kManifestVersion + 1) +
                             " is newer than this build's " + std::to_string(kManifestVersion) +
                             "; upgrade ft");
  EXPECT_EQ(out.step, 77);
}

}  // namespace
}  // namespace ft::ckpt

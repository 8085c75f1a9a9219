// Hostile manifest bytes: mutated valid encodings (resealed or not), truncations and random
// bytes must give Ok or an error with a message — never a crash, an allocation storm or a read
// out of bounds (the ASan build runs this too). Deterministic seeds, so a failure reproduces.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tests/sample_manifest.h"

namespace ft::ckpt {
namespace {

// Parses and checks the contract; returns whether the bytes parsed.
bool ParseChecked(const std::vector<uint8_t>& bytes) {
  Manifest out;
  out.job = "sentinel";
  Status s = ParseManifest(bytes, &out);
  if (!s.ok()) {
    EXPECT_FALSE(s.message().empty());
    EXPECT_TRUE(s.code() == StatusCode::kCorrupt || s.code() == StatusCode::kUnsupported) << s.ToString();
    EXPECT_EQ(out.job, "sentinel") << "output set on failure";
    return false;
  }
  // Whatever parsed survives its own round trip unchanged and is internally consistent.
  Manifest again;
  EXPECT_TRUE(ParseManifest(testing::Bytes(EncodeManifest(out)), &again).ok());
  EXPECT_EQ(again, out);
  EXPECT_EQ(out.chunk_checksums.size(), out.chunk_count());
  return true;
}

void Reseal(std::vector<uint8_t>* bytes) {
  if (bytes->size() < 8) return;
  uint64_t sum = Checksum(bytes->data(), bytes->size() - 8);
  std::memcpy(bytes->data() + bytes->size() - 8, &sum, 8);
}

TEST(ManifestFuzzTest, MutatedEncodingsNeverCrashAndAlwaysExplain) {
  std::vector<uint8_t> data;
  std::vector<uint8_t> valid = testing::Bytes(EncodeManifest(testing::SampleManifest(&data, {5000, 4096, 123, 1, 70000})));
  std::mt19937_64 rng(20261125);
  int parsed = 0, rejected = 0;
  for (int iteration = 0; iteration < 30000; ++iteration) {
    std::vector<uint8_t> bytes = valid;
    int mutations = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < mutations; ++k) {
      switch (rng() % 4) {
        case 0:  // a random byte, mostly in the header where the counts live
          bytes[(rng() % 2 ? rng() % 96 : rng()) % bytes.size()] = static_cast<uint8_t>(rng());
          break;
        case 1:  // a boundary value in an aligned word
          if (bytes.size() >= 4) {
            size_t at = (rng() % (bytes.size() / 4)) * 4;
            uint32_t v = (rng() % 2) ? 0xffffffffu : static_cast<uint32_t>(rng() % 8);
            std::memcpy(&bytes[at], &v, 4);
          }
          break;
        case 2:  // truncate
          bytes.resize(rng() % bytes.size());
          break;
        default:  // append
          bytes.resize(bytes.size() + 1 + rng() % 64, static_cast<uint8_t>(rng()));
          break;
      }
      if (bytes.empty()) break;
    }
    // Most mutations are resealed, so the structural checks behind the checksum are reached.
    if (rng() % 8 != 0) Reseal(&bytes);
    (ParseChecked(bytes) ? parsed : rejected)++;
  }
  EXPECT_GT(rejected, 20000);
  EXPECT_GT(parsed, 0);  // the unmutated-in-effect cases (e.g. a byte set to its own value)
}

TEST(ManifestFuzzTest, RandomBytesAreRejected) {
  std::mt19937_64 rng(7);
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::vector<uint8_t> bytes(rng() % 512);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    if (bytes.size() >= 8 && rng() % 2) std::memcpy(bytes.data(), "FTCKMANI", 8);  // past the magic
    if (bytes.size() >= 24 && rng() % 2) {
      uint64_t total = bytes.size();
      std::memcpy(bytes.data() + 16, &total, 8);
      Reseal(&bytes);
    }
    EXPECT_FALSE(ParseChecked(bytes));
  }
}

}  // namespace
}  // namespace ft::ckpt

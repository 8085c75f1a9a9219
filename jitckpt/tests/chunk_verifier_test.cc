#include "jitckpt/chunk_verifier.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "jitckpt/tests/sample_manifest.h"

namespace ft::ckpt {
namespace {

using testing::SampleManifest;

// 64 chunks of 4 KiB, so helpers run ahead of the caller.
Manifest Sample(std::vector<uint8_t>* data) { return SampleManifest(data, {100000, 150000, 10000}, 4096, 7); }

class ChunkVerifierTest : public ::testing::TestWithParam<int> {};

TEST_P(ChunkVerifierTest, EveryChunkOfAGoodCopyVerifiesInOrder) {
  std::vector<uint8_t> data;
  const Manifest m = Sample(&data);
  ASSERT_GT(m.chunk_count(), 60u);
  ChunkVerifier verifier(m, data.data(), GetParam());
  for (size_t i = 0; i < m.chunk_count(); ++i) EXPECT_TRUE(verifier.Verifies(i)) << i;
  EXPECT_FALSE(verifier.Verifies(m.chunk_count()));  // past the end
}

TEST_P(ChunkVerifierTest, ABadChunkFailsAndTheOnesBeforeItPass) {
  std::vector<uint8_t> data;
  const Manifest m = Sample(&data);
  const size_t bad = 37;
  data[m.chunk_begin(bad) + 100] ^= 1;
  ChunkVerifier verifier(m, data.data(), GetParam());
  for (size_t i = 0; i < bad; ++i) ASSERT_TRUE(verifier.Verifies(i)) << i;
  EXPECT_FALSE(verifier.Verifies(bad));
  // The caller stops here; the helpers ahead are stopped and joined by the destructor.
}

// From another arena: each chunk is copied to its offset in the destination and checked there,
// so what verified is what the destination holds.
TEST_P(ChunkVerifierTest, ACopiedChunkIsCheckedWhereItLanded) {
  std::vector<uint8_t> data;
  const Manifest m = Sample(&data);
  std::vector<uint8_t> dest(data.size(), 0xee);
  {
    ChunkVerifier verifier(m, data.data(), GetParam(), dest.data());
    for (size_t i = 0; i < m.chunk_count(); ++i) ASSERT_TRUE(verifier.Verifies(i)) << i;
  }
  EXPECT_EQ(dest, data);

  data[m.chunk_begin(5)] ^= 0x80;  // a bad source chunk: its copy fails
  std::vector<uint8_t> dest2(data.size(), 0);
  ChunkVerifier verifier(m, data.data(), GetParam(), dest2.data());
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(verifier.Verifies(i)) << i;
  EXPECT_FALSE(verifier.Verifies(5));
}

TEST_P(ChunkVerifierTest, StoppedBeforeAnyChunkIsAskedFor) {
  std::vector<uint8_t> data;
  const Manifest m = Sample(&data);
  for (int round = 0; round < 20; ++round) ChunkVerifier verifier(m, data.data(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Helpers, ChunkVerifierTest, ::testing::Values(1, 2, 4, 16));

TEST(ChunkVerifierOneChunkTest, AOneChunkCopyNeedsNoHelper) {
  std::vector<uint8_t> data;
  const Manifest m = SampleManifest(&data, {1000}, 4096, 3);
  ASSERT_EQ(m.chunk_count(), 1u);
  ChunkVerifier verifier(m, data.data(), 8);
  EXPECT_TRUE(verifier.Verifies(0));
}

}  // namespace
}  // namespace ft::ckpt

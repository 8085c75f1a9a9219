// ChunkChecksummer: every chunk handed in gets the checksum one thread would give it, with any
// number of helpers, in any order, and Finish returns only when all are in.
#include "preload/ckpt/ckpt_checksummer.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "jitckpt/checksum.h"

namespace ft::preload::agent {
namespace {

struct Copy {
  ckpt::Manifest manifest;
  std::vector<uint8_t> data;
};

Copy MakeCopy(uint64_t bytes, uint64_t chunk) {
  Copy c;
  c.data.resize(bytes);
  std::mt19937_64 rng(bytes);
  for (auto& b : c.data) b = static_cast<uint8_t>(rng());
  c.manifest.chunk_bytes = chunk;
  c.manifest.data_bytes = bytes;
  c.manifest.chunk_checksums.assign(c.manifest.chunk_count(), 0);
  return c;
}

std::vector<uint64_t> OneThread(const Copy& c) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < c.manifest.chunk_count(); ++i) {
    const uint64_t begin = c.manifest.chunk_begin(i);
    out.push_back(ckpt::Checksum(c.data.data() + begin, c.manifest.chunk_end(i) - begin));
  }
  return out;
}

TEST(ChunkChecksummerTest, HelpersGiveEveryChunkTheChecksumOneThreadWould) {
  for (int threads : {0, 1, 2, 5}) {
    Copy c = MakeCopy((9u << 20) + 777, 256 << 10);  // 37 chunks, the last one short
    ChunkChecksummer sums(&c.manifest, c.data.data(), threads);
    EXPECT_EQ(sums.helpers(), 0u) << "no thread before the first chunk";
    // Out of order, as landed chunks may be handed in by another caller.
    std::vector<size_t> order(c.manifest.chunk_count());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(threads));
    for (size_t i : order) sums.Add(i);
    EXPECT_EQ(sums.helpers(), threads > 1 ? static_cast<size_t>(threads) : 0u);
    sums.Finish();
    EXPECT_EQ(c.manifest.chunk_checksums, OneThread(c)) << threads << " threads";
    for (size_t i = 0; i < c.manifest.chunk_count(); ++i) {
      EXPECT_TRUE(ckpt::ChunkVerifies(c.manifest, i, c.data.data())) << i;
    }
    // After Finish, chunks are checksummed on the caller's thread.
    c.manifest.chunk_checksums[3] = 0;
    sums.Add(3);
    EXPECT_EQ(c.manifest.chunk_checksums, OneThread(c));
    EXPECT_EQ(sums.helpers(), 0u);
  }
}

TEST(ChunkChecksummerTest, DestroyingWithoutFinishStillChecksumsEverythingHandedIn) {
  Copy c = MakeCopy(4u << 20, 64 << 10);
  {
    ChunkChecksummer sums(&c.manifest, c.data.data(), 3);
    for (size_t i = 0; i < c.manifest.chunk_count(); ++i) sums.Add(i);
  }
  EXPECT_EQ(c.manifest.chunk_checksums, OneThread(c));
}

TEST(ChunkChecksummerTest, ThreadsAreTheSettingOrHalfTheRanksShareOfTheCoresUpToEight) {
  constexpr uint64_t kGiB = 1ull << 30;
  EXPECT_EQ(ChecksumThreads(3, 2, 1, kGiB), 3);  // configured wins
  EXPECT_EQ(ChecksumThreads(1, 256, 1, kGiB), 1);
  EXPECT_EQ(ChecksumThreads(1000, 2, 1, kGiB), 64);
  EXPECT_EQ(ChecksumThreads(0, 0, 1, kGiB), 1);  // hardware_concurrency unknown
  EXPECT_EQ(ChecksumThreads(0, 2, 1, kGiB), 1);  // this VM: the other core is gpusim's copy
  EXPECT_EQ(ChecksumThreads(0, 16, 1, kGiB), 8);  // the H200 host, one rank
  EXPECT_EQ(ChecksumThreads(0, 224, 8, kGiB), 8);  // 8 ranks on 224 threads: 14 each, capped
  EXPECT_EQ(ChecksumThreads(0, 64, 8, kGiB), 4);
  EXPECT_EQ(ChecksumThreads(0, 64, -1, kGiB), 4);  // unknown: 8 ranks assumed
  EXPECT_EQ(ChecksumThreads(-1, 64, 0, kGiB), 4);
  EXPECT_EQ(ChecksumThreads(0, 224, 8, 100ull << 20), 1);  // a small save needs no crowd
  EXPECT_EQ(ChecksumThreads(0, 224, 8, 200ull << 20), 3);
  EXPECT_EQ(ChecksumThreads(0, 224, 8, 1ull << 20), 1);
}

}  // namespace
}  // namespace ft::preload::agent

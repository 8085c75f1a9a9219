#include "jitckpt/checksum.h"

#include "jitckpt/checksum_simd.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace ft::ckpt {
namespace {

TEST(ChecksumTest, IsXxh3Of64Bits) {
  // The published XXH3-64 of empty input (seed 0): pins the algorithm, which crosses builds
  // (a manifest written by one build is verified by another).
  EXPECT_EQ(Checksum(nullptr, 0), 0x2d06800538d394c2ull);
}

TEST(ChecksumTest, OneFlippedBitChangesIt) {
  std::vector<uint8_t> data(1 << 16);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31);
  uint64_t before = Checksum(data);
  for (size_t at : {size_t{0}, size_t{4095}, data.size() - 1}) {
    data[at] ^= 0x10;
    EXPECT_NE(Checksum(data), before) << at;
    data[at] ^= 0x10;
  }
  EXPECT_EQ(Checksum(data), before);
}

// Each vector build this CPU can run gives the baseline's checksum for every length class
// XXH3 treats apart (0, 1-3, 4-8, 9-16, 17-128, 129-240, long inputs by whole and partial
// stripes and blocks) and at every alignment: a copy saved on one host verifies on another.
TEST(ChecksumTest, EveryVectorBuildIsTheSameFunction) {
  using internal::ChecksumVector;
  std::mt19937_64 rng(7);
  std::vector<uint8_t> data((1 << 20) + 64);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (size_t n : {1023u, 1024u, 1025u, 4096u, 65535u, 65536u, 1000003u, 1u << 20}) lengths.push_back(n);
  int compared = 0;
  for (ChecksumVector v : {ChecksumVector::kAvx2, ChecksumVector::kAvx512}) {
    if (!internal::ChecksumVectorAvailable(v)) continue;
    SCOPED_TRACE(internal::ChecksumVectorName(v));
    for (size_t n : lengths) {
      for (size_t offset : {size_t{0}, size_t{1}, size_t{7}, size_t{32}}) {
        const uint8_t* p = data.data() + offset;
        ASSERT_EQ(internal::ChecksumWith(v, p, n), internal::ChecksumWith(ChecksumVector::kBaseline, p, n))
            << "length " << n << " offset " << offset;
      }
    }
    ++compared;
  }
  // What Checksum() uses is one of them, and the same function.
  EXPECT_TRUE(internal::ChecksumVectorAvailable(internal::ChecksumVectorInUse()));
  EXPECT_EQ(Checksum(data.data(), data.size()),
            internal::ChecksumWith(ChecksumVector::kBaseline, data.data(), data.size()));
  if (compared == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512: only the baseline ran";
}

TEST(ChecksumTest, DigestHexRoundTripsAndIsLowercaseSixteenDigits) {
  for (uint64_t value : {0ull, 1ull, 0xdeadbeefcafef00dull, ~0ull}) {
    std::string hex = DigestHex(value);
    EXPECT_EQ(hex.size(), 16u);
    uint64_t back = 0;
    ASSERT_TRUE(ParseDigest(hex, &back)) << hex;
    EXPECT_EQ(back, value);
  }
  EXPECT_EQ(DigestHex(0xabc), "0000000000000abc");
}

TEST(ChecksumTest, ParseDigestRejectsEverythingElseAndLeavesOutputAlone) {
  uint64_t out = 42;
  for (const char* bad : {"", "abc", "0000000000000abc0", "000000000000ABCD", "000000000000abcg",
                          " 00000000000abcd", "0x00000000000abc", "-000000000000001"}) {
    EXPECT_FALSE(ParseDigest(bad, &out)) << bad;
  }
  EXPECT_EQ(out, 42u);
}

}  // namespace
}  // namespace ft::ckpt

#include "jitckpt/checksum.h"

#include <gtest/gtest.h>

#include <cstring>
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

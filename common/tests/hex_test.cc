#include "common/hex.h"

#include <gtest/gtest.h>

namespace ft {
namespace {

TEST(HexTest, WritesSixteenLowercaseDigitsZeroPadded) {
  EXPECT_EQ(Hex64(0), "0000000000000000");
  EXPECT_EQ(Hex64(0xabcdef0123456789ull), "abcdef0123456789");
  EXPECT_EQ(Hex64(0x1f), "000000000000001f");
  EXPECT_EQ(Hex64(~0ull), "ffffffffffffffff");
}

TEST(HexTest, ReadsBackWhatItWrites) {
  for (uint64_t v : {0ull, 1ull, 0x8000000000000000ull, 0xfedcba9876543210ull, ~0ull}) {
    uint64_t got = 7;
    ASSERT_TRUE(ParseHex64(Hex64(v), &got)) << v;
    EXPECT_EQ(got, v);
    got = 7;
    ASSERT_TRUE(ParseHex64(Hex64(v), &got, HexCase::kLowerOnly)) << v;
    EXPECT_EQ(got, v);
  }
}

TEST(HexTest, UpperCaseOnlyWhereAsked) {
  uint64_t got = 0;
  EXPECT_TRUE(ParseHex64("ABCDEF0123456789", &got));
  EXPECT_EQ(got, 0xabcdef0123456789ull);
  got = 5;
  EXPECT_FALSE(ParseHex64("ABCDEF0123456789", &got, HexCase::kLowerOnly));
  EXPECT_EQ(got, 5u) << "a refused text leaves the value as it was";
}

TEST(HexTest, RefusesAnythingButSixteenDigits) {
  uint64_t got = 9;
  for (const char* bad : {"", "0", "000000000000000", "00000000000000000", "0x00000000000000",
                          "000000000000000g", " 000000000000000", "000000000000000-"}) {
    EXPECT_FALSE(ParseHex64(bad, &got)) << '"' << bad << '"';
  }
  EXPECT_EQ(got, 9u);
}

}  // namespace
}  // namespace ft

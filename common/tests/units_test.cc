#include "common/units.h"

#include <gtest/gtest.h>

namespace ft {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(UnitsTest, DurationsWithUnits) {
  Duration d;
  ASSERT_TRUE(ParseDuration("500ms", &d).ok());
  EXPECT_EQ(d, milliseconds(500));
  ASSERT_TRUE(ParseDuration("2s", &d).ok());
  EXPECT_EQ(d, seconds(2));
  ASSERT_TRUE(ParseDuration("1.5m", &d).ok());
  EXPECT_EQ(d, seconds(90));
  ASSERT_TRUE(ParseDuration("250us", &d).ok());
  EXPECT_EQ(d, std::chrono::microseconds(250));
  ASSERT_TRUE(ParseDuration(" 3 ", &d).ok());  // bare number: seconds
  EXPECT_EQ(d, seconds(3));
  ASSERT_TRUE(ParseDuration("1H", &d).ok());
  EXPECT_EQ(d, seconds(3600));
  ASSERT_TRUE(ParseDuration("30d", &d).ok());  // days: how long a node's history is kept
  EXPECT_EQ(d, seconds(30 * 86400));
}

TEST(UnitsTest, BadDurationsAreErrorsAndLeaveOutputAlone) {
  Duration d = seconds(7);
  EXPECT_EQ(ParseDuration("5 parsecs", &d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDuration("", &d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDuration("-1s", &d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDuration("1e400s", &d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDuration("99999999999h", &d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d, seconds(7));
}

TEST(UnitsTest, SizesAreBinary) {
  uint64_t bytes = 0;
  ASSERT_TRUE(ParseSize("64mb", &bytes).ok());
  EXPECT_EQ(bytes, 64ull << 20);
  ASSERT_TRUE(ParseSize("4KiB", &bytes).ok());
  EXPECT_EQ(bytes, 4096u);
  ASSERT_TRUE(ParseSize("1g", &bytes).ok());
  EXPECT_EQ(bytes, 1ull << 30);
  ASSERT_TRUE(ParseSize("0.5kb", &bytes).ok());
  EXPECT_EQ(bytes, 512u);
  ASSERT_TRUE(ParseSize("123", &bytes).ok());
  EXPECT_EQ(bytes, 123u);
  EXPECT_FALSE(ParseSize("1.3b", &bytes).ok());
  EXPECT_FALSE(ParseSize("10 bananas", &bytes).ok());
  EXPECT_FALSE(ParseSize("-5mb", &bytes).ok());
  EXPECT_FALSE(ParseSize("99999999tb", &bytes).ok());
}

TEST(UnitsTest, BoolsAndInts) {
  bool b = false;
  ASSERT_TRUE(ParseBool("Yes", &b).ok());
  EXPECT_TRUE(b);
  ASSERT_TRUE(ParseBool("off", &b).ok());
  EXPECT_FALSE(b);
  EXPECT_FALSE(ParseBool("maybe", &b).ok());
  int64_t i = 0;
  ASSERT_TRUE(ParseInt("-42", &i).ok());
  EXPECT_EQ(i, -42);
  EXPECT_FALSE(ParseInt("42x", &i).ok());
  EXPECT_FALSE(ParseInt("", &i).ok());
  EXPECT_FALSE(ParseInt("99999999999999999999", &i).ok());
}

TEST(UnitsTest, FormatRoundTrips) {
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(seconds(120)), "2m");
  EXPECT_EQ(FormatDuration(Duration(7)), "7ns");
  EXPECT_EQ(FormatDuration(Duration(0)), "0ns");
  EXPECT_EQ(FormatSize(64ull << 20), "64mb");
  EXPECT_EQ(FormatSize(1000), "1000b");
  for (const char* text : {"1500ms", "2m", "7ns", "3h", "250us"}) {
    Duration d;
    ASSERT_TRUE(ParseDuration(text, &d).ok());
    EXPECT_EQ(FormatDuration(d), text);
  }
}

}  // namespace
}  // namespace ft

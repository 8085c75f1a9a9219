// common/names.h: a vocabulary's table read both ways, a value or name it lacks refused, and the
// uniqueness check the tables' static_asserts rely on.
#include "common/names.h"

#include <gtest/gtest.h>

#include <string>

namespace ft {
namespace {

enum class Color : int { kRed = 0, kGreen = 1, kBlue = 7 };
constexpr Named<Color> kColorNames[] = {{Color::kRed, "red"}, {Color::kGreen, "green"}, {Color::kBlue, "blue"}};
static_assert(NamesAreUnique(kColorNames));
static_assert(std::string_view(NameIn(kColorNames, Color::kBlue)) == "blue");  // usable at compile time

TEST(NamesTest, EveryNameParsesBackToItsValue) {
  for (const Named<Color>& e : kColorNames) {
    EXPECT_EQ(ParseIn(kColorNames, e.name), e.value) << e.name;
    EXPECT_STREQ(NameIn(kColorNames, e.value), e.name);
  }
}

TEST(NamesTest, AValueOutsideTheTableNamesItselfUnknown) {
  EXPECT_STREQ(NameIn(kColorNames, static_cast<Color>(3)), "?");
  EXPECT_STREQ(NameIn(kColorNames, static_cast<Color>(3), "untyped"), "untyped");
}

TEST(NamesTest, ParsingIsExactAndRefusesWhatTheTableLacks) {
  EXPECT_FALSE(ParseIn(kColorNames, "").has_value());
  EXPECT_FALSE(ParseIn(kColorNames, "Red").has_value());
  EXPECT_FALSE(ParseIn(kColorNames, "red ").has_value());
  EXPECT_FALSE(ParseIn(kColorNames, "purple").has_value());
  // A view into a longer string: only its own bytes count.
  const std::string text = "greenish";
  EXPECT_EQ(ParseIn(kColorNames, std::string_view(text).substr(0, 5)), Color::kGreen);
}

TEST(NamesTest, ValuesComeInTheTablesOrder) {
  constexpr auto values = ValuesIn(kColorNames);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0], Color::kRed);
  EXPECT_EQ(values[1], Color::kGreen);
  EXPECT_EQ(values[2], Color::kBlue);
}

TEST(NamesTest, ATableWithAValueOrANameTwiceIsNotUnique) {
  constexpr Named<Color> value_twice[] = {{Color::kRed, "red"}, {Color::kRed, "rouge"}};
  constexpr Named<Color> name_twice[] = {{Color::kRed, "red"}, {Color::kBlue, "red"}};
  EXPECT_FALSE(NamesAreUnique(value_twice));
  EXPECT_FALSE(NamesAreUnique(name_twice));
  EXPECT_TRUE(NamesAreUnique(kColorNames));
}

}  // namespace
}  // namespace ft

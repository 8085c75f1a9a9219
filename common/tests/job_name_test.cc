#include "common/job_name.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace ft {
namespace {

TEST(JobTokenTest, PlainNamesAreTheirOwnToken) {
  EXPECT_EQ(JobToken("llama-70b_run3"), "llama-70b_run3");
  const std::string longest(kMaxJobToken, 'j');
  EXPECT_EQ(JobToken(longest), longest);
}

// Names that the old rules ('.' and others to '_', cut at 48) spelled alike get tokens of
// their own.
TEST(JobTokenTest, NamesThatDifferGetDifferentTokens) {
  const std::string prefix(60, 'p');
  const std::vector<std::string> names = {"a.b", "a_b", "a/b", "a b", "a{b", "", "default", "_",
                                          prefix + "1", prefix + "2", prefix, std::string(49, 'j'),
                                          std::string(48, 'j'), std::string("a\0b", 3), "n\xc3\xa9"};
  std::set<std::string> tokens;
  for (const std::string& name : names) {
    const std::string token = JobToken(name);
    EXPECT_TRUE(tokens.insert(token).second) << "'" << name << "' shares its token " << token;
    EXPECT_LE(token.size(), kMaxJobToken) << token;
    EXPECT_FALSE(token.empty());
    for (char c : token) EXPECT_TRUE(IsJobTokenChar(c)) << token;
  }
}

TEST(JobTokenTest, TokensAreTheirOwnTokenAndStable) {
  for (const std::string& name : std::vector<std::string>{"a.b", "", std::string(200, 'x') + ".y", "evil}job{"}) {
    const std::string token = JobToken(name);
    EXPECT_EQ(JobToken(token), token) << name;
  }
  // The digest is part of on-disk and Redis names: pinned.
  EXPECT_EQ(JobToken("exp.1"), "exp_1-0b19967530264bbe");
  EXPECT_EQ(JobToken(std::string(60, 'p')).substr(0, 32), std::string(31, 'p') + "-");
}

}  // namespace
}  // namespace ft

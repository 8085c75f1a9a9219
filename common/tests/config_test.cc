#include "common/config.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

namespace ft {
namespace {

Environment Env(std::map<std::string, std::string, std::less<>> vars) { return Environment(std::move(vars)); }

TEST(ConfigTest, EveryDefaultParses) {
  Config config;
  std::vector<std::string> warnings;
  ASSERT_TRUE(Config::Load(Environment(), &config, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(config.enable);
  EXPECT_EQ(config.rank, -1);
  EXPECT_EQ(config.log_level, "info");
}

TEST(ConfigTest, TableIsWellFormed) {
  std::set<std::string> keys;
  for (const SettingInfo& info : AllSettings()) {
    EXPECT_TRUE(std::string_view(info.env_key).starts_with("FT_")) << info.env_key;
    EXPECT_TRUE(keys.insert(info.env_key).second) << "duplicate " << info.env_key;
    EXPECT_GT(std::string_view(info.help).size(), 10u) << info.env_key << " needs help text";
  }
}

TEST(ConfigTest, EnvironmentOverridesDefaults) {
  Config config;
  std::vector<std::string> warnings;
  ASSERT_TRUE(Config::Load(Env({{"FT_ENABLE", "off"}, {"FT_RANK", "17"}, {"FT_JOB", "llama"}}),
                           &config, &warnings)
                  .ok());
  EXPECT_FALSE(config.enable);
  EXPECT_EQ(config.rank, 17);
  EXPECT_EQ(config.job, "llama");
}

TEST(ConfigTest, BadValueNamesTheKeyAndChangesNothing) {
  Config config = Config::Defaults();
  config.job = "kept";
  std::vector<std::string> warnings;
  Status status = Config::Load(Env({{"FT_RANK", "three"}}), &config, &warnings);
  ASSERT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("FT_RANK='three'"), std::string_view::npos) << status.ToString();
  EXPECT_NE(status.message().find("int setting"), std::string_view::npos) << status.ToString();
  EXPECT_EQ(config.job, "kept");
}

TEST(ConfigTest, UnknownFtVariableWarnsOthersIgnored) {
  Config config;
  std::vector<std::string> warnings;
  ASSERT_TRUE(Config::Load(Env({{"FT_RANKK", "3"}, {"PATH", "/bin"}, {"NCCL_DEBUG", "INFO"}}),
                           &config, &warnings)
                  .ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("FT_RANKK"), std::string::npos);
  EXPECT_NE(warnings[0].find("did you mean FT_RANK?"), std::string::npos) << warnings[0];
}

// A typo of a setting (an edit or two: a letter missing, doubled, swapped, another case) is
// warned with the setting it is near; another program's FT_* variable (FasterTransformer's,
// say) is no typo of ours: every rank would print it. It is listed apart, for one line.
TEST(ConfigTest, OnlyANearMissOfASettingIsWarnedAsATypo) {
  Config config;
  std::vector<std::string> warnings, others;
  ASSERT_TRUE(Config::Load(Env({{"FT_CKPT_EVRY", "3"},
                                {"FT_CKPT_ARENA_SLTOS", "1"},
                                {"FT_Ckpt_Keep", "2"},
                                {"FT_DEBUG_LEVEL", "DEBUG"},
                                {"FT_NVTX", "ON"},
                                {"FT_JIT", "1"}}),
                           &config, &warnings, &others)
                  .ok());
  std::string all;
  for (const auto& w : warnings) all += w + "\n";
  EXPECT_EQ(warnings.size(), 3u) << all;
  EXPECT_NE(all.find("FT_CKPT_EVRY is ignored: did you mean FT_CKPT_EVERY?"), std::string::npos) << all;
  EXPECT_NE(all.find("FT_CKPT_ARENA_SLTOS is ignored: did you mean FT_CKPT_ARENA_SLOTS?"), std::string::npos)
      << all;
  EXPECT_NE(all.find("FT_Ckpt_Keep is ignored: did you mean FT_CKPT_KEEP?"), std::string::npos) << all;
  std::sort(others.begin(), others.end());
  EXPECT_EQ(others, (std::vector<std::string>{"FT_DEBUG_LEVEL", "FT_JIT", "FT_NVTX"}));
  EXPECT_EQ(config.ckpt_every, Config::Defaults().ckpt_every);  // a typo sets nothing
}

TEST(ConfigTest, DescribeShowsCurrentValues) {
  Config config = Config::Defaults();
  config.rank = 5;
  std::string text = DescribeConfig(config, /*markdown=*/false);
  EXPECT_NE(text.find("FT_RANK"), std::string::npos);
  EXPECT_NE(text.find("value=5"), std::string::npos);
  std::string markdown = DescribeConfig(config, /*markdown=*/true);
  EXPECT_EQ(markdown.rfind("| Variable | Type | Default | Meaning |", 0), 0u);
  EXPECT_NE(markdown.find("| `FT_ENABLE` | bool | `1` |"), std::string::npos);
}

TEST(ConfigTest, SecretsAreNeverPrinted) {
  Config config;
  std::vector<std::string> warnings;
  ASSERT_TRUE(Config::Load(Env({{"FT_REDIS_PASSWORD", "hunter2-secret"}}), &config, &warnings).ok());
  EXPECT_EQ(config.redis_password, "hunter2-secret");  // the value itself is there for Redis
  std::string text = DescribeConfig(config, /*markdown=*/false);
  EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
  EXPECT_NE(text.find("FT_REDIS_PASSWORD secret   default=\"\"       value=<redacted>"), std::string::npos) << text;
  // Every secret of the table, not just the one we know of today.
  bool any_secret = false;
  for (const SettingInfo& info : AllSettings()) {
    if (info.type != SettingType::kSecret) continue;
    any_secret = true;
    EXPECT_EQ(config.ValueText(info), info.env_key == std::string_view("FT_REDIS_PASSWORD") ? kRedacted : "");
  }
  EXPECT_TRUE(any_secret) << "FT_REDIS_PASSWORD must be marked Secret in config_table.def";
  // An empty secret shows that it is unset.
  EXPECT_NE(DescribeConfig(Config::Defaults(), false).find("FT_REDIS_PASSWORD secret   default=\"\"       value=\n"),
            std::string::npos);
  EXPECT_NE(DescribeConfig(config, /*markdown=*/true).find("| `FT_REDIS_PASSWORD` | secret |"), std::string::npos);
}

}  // namespace
}  // namespace ft

#include "common/config.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

#include "common/names.h"

namespace ft {
namespace {

constexpr SettingInfo kSettings[] = {
#define FT_SETTING(field, type, env_key, default_text, help) \
  {#field, SettingType::k##type, env_key, default_text, help},
#include "common/config_table.def"
#undef FT_SETTING
};

Status ParseValue(std::string_view text, bool* out) { return ParseBool(text, out); }
Status ParseValue(std::string_view text, int64_t* out) { return ParseInt(text, out); }
// Every SettingType has its parser and formatter, also while no setting of that type exists.
[[maybe_unused]] Status ParseValue(std::string_view text, uint64_t* out) { return ParseSize(text, out); }
[[maybe_unused]] Status ParseValue(std::string_view text, Duration* out) { return ParseDuration(text, out); }
Status ParseValue(std::string_view text, std::string* out) {
  *out = std::string(text);
  return Status::Ok();
}

std::string FormatValue(bool value) { return value ? "1" : "0"; }
std::string FormatValue(int64_t value) { return std::to_string(value); }
[[maybe_unused]] std::string FormatValue(uint64_t value) { return FormatSize(value); }
[[maybe_unused]] std::string FormatValue(Duration value) { return FormatDuration(value); }
std::string FormatValue(const std::string& value) { return value; }

bool IsKnownKey(std::string_view key) {
  return std::any_of(std::begin(kSettings), std::end(kSettings),
                     [&](const SettingInfo& info) { return key == info.env_key; });
}

// Edits (insert, delete, replace, swap two neighbours) from a to b, case ignored; stops
// counting past `limit` (the caller only asks "within 2?").
int EditDistance(std::string_view a, std::string_view b, int limit) {
  const size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > static_cast<size_t>(limit)) return limit + 1;
  auto same = [](char x, char y) { return std::toupper(static_cast<unsigned char>(x)) ==
                                          std::toupper(static_cast<unsigned char>(y)); };
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return std::min(d[n][m], limit + 1);
}

// The setting an unknown FT_* name is most likely a typo of, or nullptr. Other programs use
// the FT_ prefix too (FasterTransformer's FT_DEBUG_LEVEL, ...): only a near miss of one of
// ours is taken for a typo. Short names allow one edit, longer ones two.
const char* NearMiss(std::string_view key) {
  std::string_view name = key.substr(3);
  const int allowed = name.size() <= 5 ? 1 : 2;
  const char* best = nullptr;
  int best_distance = allowed + 1;
  for (const SettingInfo& info : kSettings) {
    int d = EditDistance(name, std::string_view(info.env_key).substr(3), allowed);
    if (d < best_distance) {
      best = info.env_key;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace

std::span<const SettingInfo> AllSettings() { return kSettings; }

namespace {
constexpr Named<SettingType> kSettingTypeNames[] = {
    {SettingType::kBool, "bool"}, {SettingType::kInt, "int"}, {SettingType::kSize, "size"},
    {SettingType::kDuration, "duration"}, {SettingType::kString, "string"}, {SettingType::kSecret, "secret"}};
static_assert(NamesAreUnique(kSettingTypeNames));
}  // namespace

const char* SettingTypeName(SettingType type) { return NameIn(kSettingTypeNames, type); }

Config Config::Defaults() {
  Config config;
  std::vector<std::string> ignored;
  // The table's defaults are tested to parse, so loading an empty environment cannot fail.
  (void)Load(Environment(), &config, &ignored);
  return config;
}

Status Config::Load(const Environment& env, Config* out, std::vector<std::string>* warnings,
                    std::vector<std::string>* not_settings) {
  Config parsed;
#define FT_SETTING(field, type, env_key, default_text, help)                                   \
  {                                                                                            \
    std::string_view text = env.Get(env_key).value_or(default_text);                           \
    Status status = ParseValue(text, &parsed.field);                                           \
    if (!status.ok()) {                                                                        \
      return Status::InvalidArgument(std::string(env_key) + "='" + std::string(text) +         \
                                     "': " + std::string(status.message()) + " (" +            \
                                     SettingTypeName(SettingType::k##type) + " setting)");     \
    }                                                                                          \
  }
#include "common/config_table.def"
#undef FT_SETTING
  for (const auto& [key, value] : env.vars()) {
    if (!key.starts_with("FT_") || IsKnownKey(key)) continue;
    if (const char* meant = NearMiss(key)) {
      warnings->push_back("unknown setting " + key + " is ignored: did you mean " + meant + "?");
    } else if (not_settings != nullptr) {
      not_settings->push_back(key);
    }
  }
  *out = std::move(parsed);
  return Status::Ok();
}

std::string Config::ValueText(const SettingInfo& info) const {
  std::string_view field = info.field;
  if (info.type == SettingType::kSecret) {
    std::string value;
#define FT_SETTING(name, type, env_key, default_text, help) \
  if (field == #name) value = FormatValue(name);
#include "common/config_table.def"
#undef FT_SETTING
    return value.empty() ? "" : kRedacted;
  }
#define FT_SETTING(name, type, env_key, default_text, help) \
  if (field == #name) return FormatValue(name);
#include "common/config_table.def"
#undef FT_SETTING
  return "";
}

std::string DescribeConfig(const Config& config, bool markdown) {
  std::string out;
  if (markdown) {
    out += "| Variable | Type | Default | Meaning |\n|---|---|---|---|\n";
    for (const SettingInfo& info : kSettings) {
      std::string def = info.default_text[0] ? std::string("`") + info.default_text + "`" : "(empty)";
      out += std::string("| `") + info.env_key + "` | " + SettingTypeName(info.type) + " | " + def +
             " | " + info.help + " |\n";
    }
    return out;
  }
  for (const SettingInfo& info : kSettings) {
    char line[256];
    std::snprintf(line, sizeof(line), "%-16s %-8s default=%-8s value=%s\n", info.env_key,
                  SettingTypeName(info.type), info.default_text[0] ? info.default_text : "\"\"",
                  config.ValueText(info).c_str());
    out += line;
    out += "    ";
    out += info.help;
    out += '\n';
  }
  return out;
}

}  // namespace ft

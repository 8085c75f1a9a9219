// ft::Config: typed values of every setting in common/config_table.def. Load() is the one
// reader of FT_* environment variables. A Config is a plain value: copy it freely.
#ifndef FT_COMMON_CONFIG_H_
#define FT_COMMON_CONFIG_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/environment.h"
#include "common/status.h"
#include "common/units.h"

namespace ft {

// kSecret is a string that is never shown: wherever a setting's value is printed (print-config,
// logs, errors) a set secret reads kRedacted.
enum class SettingType { kBool, kInt, kSize, kDuration, kString, kSecret };

inline constexpr const char* kRedacted = "<redacted>";

struct SettingInfo {
  const char* field;
  SettingType type;
  const char* env_key;
  const char* default_text;
  const char* help;
};

// Every setting, in table order.
std::span<const SettingInfo> AllSettings();
const char* SettingTypeName(SettingType type);

#define FT_SETTING_CPP_Bool bool
#define FT_SETTING_CPP_Int int64_t
#define FT_SETTING_CPP_Size uint64_t
#define FT_SETTING_CPP_Duration ::ft::Duration
#define FT_SETTING_CPP_String std::string
#define FT_SETTING_CPP_Secret std::string

struct Config {
#define FT_SETTING(field, type, env_key, default_text, help) FT_SETTING_CPP_##type field{};
#include "common/config_table.def"
#undef FT_SETTING

  // Defaults, then overrides from `env`. A bad value is an InvalidArgument naming the key and
  // the accepted syntax; `out` is untouched then. An FT_* variable that names no setting but
  // is within an edit or two of one adds a line to `warnings` naming it (a typo must not
  // silently do nothing); any other FT_* variable is another program's (the prefix is not
  // ours alone) and is only listed in `not_settings`, when given.
  static Status Load(const Environment& env, Config* out, std::vector<std::string>* warnings,
                     std::vector<std::string>* not_settings = nullptr);
  static Config Defaults();

  // The current value of a setting as text in its own syntax ("500ms", "64mb", "1"); a set
  // secret is kRedacted, an empty one "".
  std::string ValueText(const SettingInfo& info) const;
};

// A table for humans: key, type, default, current value, help. `markdown` gives the table
// used in docs/configuration.md.
std::string DescribeConfig(const Config& config, bool markdown);

}  // namespace ft

#endif  // FT_COMMON_CONFIG_H_

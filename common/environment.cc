#include "common/environment.h"

#include <unistd.h>

#include <cstring>

extern char** environ;

namespace ft {

Environment Environment::FromProcess() {
  std::map<std::string, std::string, std::less<>> vars;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* eq = std::strchr(*entry, '=');
    if (eq == nullptr) continue;
    vars.emplace(std::string(*entry, eq - *entry), std::string(eq + 1));
  }
  return Environment(std::move(vars));
}

std::optional<std::string_view> Environment::Get(std::string_view name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return std::string_view(it->second);
}

}  // namespace ft

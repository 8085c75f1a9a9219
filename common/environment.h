// ft::Environment: a snapshot of the process environment. The only place in ft that reads
// environment variables; everything else asks the configuration table (common/config.h) or,
// for the launcher's identity variables (RANK, SLURM_PROCID, ...), this snapshot.
// Immutable after construction: safe to share between threads.
#ifndef FT_COMMON_ENVIRONMENT_H_
#define FT_COMMON_ENVIRONMENT_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ft {

class Environment {
 public:
  Environment() = default;
  explicit Environment(std::map<std::string, std::string, std::less<>> vars)
      : vars_(std::move(vars)) {}

  // Copies `environ`. Safe in a library constructor (no allocation-heavy parsing, no locks
  // besides malloc's).
  static Environment FromProcess();

  std::optional<std::string_view> Get(std::string_view name) const;
  const std::map<std::string, std::string, std::less<>>& vars() const { return vars_; }

 private:
  std::map<std::string, std::string, std::less<>> vars_;
};

}  // namespace ft

#endif  // FT_COMMON_ENVIRONMENT_H_

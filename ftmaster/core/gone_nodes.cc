#include "ftmaster/core/gone_nodes.h"

namespace ft::master {

bool GoneNodes::Observe(const std::map<std::string, bool>& seen, int64_t now_ms) {
  const std::set<std::string> before = gone_;
  for (auto it = missing_since_.begin(); it != missing_since_.end();) {
    it = seen.count(it->first) ? std::next(it) : missing_since_.erase(it);
  }
  for (const auto& [node, beats] : seen) {
    if (beats) {
      beat_seen_.insert(node);
      missing_since_.erase(node);
      gone_.erase(node);
      continue;
    }
    if (!beat_seen_.count(node)) continue;
    const int64_t since = missing_since_.emplace(node, now_ms).first->second;
    if (now_ms - since >= kGoneAfterMs) gone_.insert(node);
  }
  for (auto it = gone_.begin(); it != gone_.end();) {
    it = seen.count(*it) ? std::next(it) : gone_.erase(it);
  }
  return gone_ != before;
}

}  // namespace ft::master

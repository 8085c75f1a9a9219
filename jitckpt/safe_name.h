// File-name parts of checkpoint files (arenas, plan files): the job and node names as they
// appear in paths, restricted so that a name can never reach outside its directory or be
// confused with the separators ('.') that List and RankOf rely on. Pure functions.
#ifndef FT_JITCKPT_SAFE_NAME_H_
#define FT_JITCKPT_SAFE_NAME_H_

#include <string>
#include <string_view>

#include "common/job_name.h"

namespace ft::ckpt {

// A job as every file name spells it: common/job_name.h's JobToken ([A-Za-z0-9_-], at most 48
// characters, a digest suffix when the name had to change), the spelling of shm segment names
// and Redis keys too. No '.', so the rank after the last '.' is unambiguous; its own result is
// unchanged by it (RankOf relies on that).
inline std::string SafeJobName(std::string_view job) { return JobToken(job); }

inline bool IsNodeNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// A node (host) name: [A-Za-z0-9_.-], others become '_', at most 64 characters, "default"
// when empty; "." and ".." become "_" and "__" so a name is never a directory reference.
inline std::string SafeNodeName(std::string_view node) {
  std::string out;
  for (char c : node.substr(0, 64)) out += IsNodeNameChar(c) ? c : '_';
  if (out.empty()) return "default";
  if (out == "." || out == "..") out.assign(out.size(), '_');
  return out;
}

// "<dir>/<name>" without a doubled '/'.
inline std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_SAFE_NAME_H_

// File-name parts of checkpoint files (arenas, plan files): the job and node names as they
// appear in paths, restricted so that a name can never reach outside its directory or be
// confused with the separators ('.') that List and RankOf rely on. Pure functions.
#ifndef FT_JITCKPT_SAFE_NAME_H_
#define FT_JITCKPT_SAFE_NAME_H_

#include <string>
#include <string_view>

namespace ft::ckpt {

// A job as shm segment names spell it: [A-Za-z0-9_-], others become '_', at most 48
// characters, "default" when empty. No '.', so the rank after the last '.' is unambiguous.
inline std::string SafeJobName(std::string_view job) {
  std::string out;
  for (char c : job.substr(0, 48)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? "default" : out;
}

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

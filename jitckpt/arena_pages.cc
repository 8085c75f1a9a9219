#include "jitckpt/arena_pages.h"

#include <limits.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace ft::ckpt {

namespace {

// proc(5) writes a space, tab, newline or backslash in a path as \ and three octal digits.
std::string Unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string_view digits = field.substr(i + 1, 3);
      if (digits.find_first_not_of("01234567") == std::string_view::npos) {
        out += static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t at = 0;
  while (at < line.size()) {
    const size_t end = std::min(line.find(' ', at), line.size());
    if (end > at) fields.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return fields;
}

// Whether `mount_point` holds `dir`: equal, or a whole leading run of its components.
bool Holds(std::string_view mount_point, std::string_view dir) {
  if (mount_point == "/") return !dir.empty() && dir[0] == '/';
  if (dir.substr(0, mount_point.size()) != mount_point) return false;
  return dir.size() == mount_point.size() || dir[mount_point.size()] == '/';
}

std::string OptionValue(std::string_view options, std::string_view key) {
  size_t at = 0;
  while (at <= options.size()) {
    const size_t end = std::min(options.find(',', at), options.size());
    const std::string_view option = options.substr(at, end - at);
    if (option.size() > key.size() && option.substr(0, key.size()) == key && option[key.size()] == '=') {
      return std::string(option.substr(key.size() + 1));
    }
    at = end + 1;
  }
  return "";
}

}  // namespace

ArenaPages ArenaPagesOf(std::string_view mountinfo, std::string_view dir, std::string_view shmem_enabled) {
  ArenaPages best;
  size_t at = 0;
  while (at < mountinfo.size()) {
    const size_t end = std::min(mountinfo.find('\n', at), mountinfo.size());
    const std::vector<std::string_view> f = Fields(mountinfo.substr(at, end - at));
    at = end + 1;
    // id parent major:minor root mount-point options [optional fields...] - type source super-options
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 7 || dash + 1 >= f.size()) continue;
    const std::string mount_point = Unescape(f[4]);
    if (!Holds(mount_point, dir)) continue;
    if (best.known && mount_point.size() < best.mount_point.size()) continue;
    best.known = true;
    best.mount_point = mount_point;
    best.fs_type = std::string(f[dash + 1]);
    best.huge_option.clear();
    best.huge = false;
    if (best.fs_type == "tmpfs") {
      best.huge_option = dash + 3 < f.size() ? OptionValue(f[dash + 3], "huge") : "";
      if (best.huge_option.empty()) best.huge_option = "never";
      best.huge = best.huge_option == "always" || best.huge_option == "within_size" || best.huge_option == "advise";
    }
  }
  // The chosen value is the one in brackets: "always within_size advise [never] deny force".
  const size_t open = shmem_enabled.find('['), close = shmem_enabled.find(']');
  const std::string_view chosen = open != std::string_view::npos && close != std::string_view::npos && close > open
                                      ? shmem_enabled.substr(open + 1, close - open - 1)
                                      : std::string_view();
  if (best.fs_type == "tmpfs" && (chosen == "deny" || chosen == "force")) {
    best.huge = chosen == "force";
    best.huge_option = fmt::format("{} (shmem_enabled {})", best.huge ? "always" : "never", chosen);
  }
  return best;
}

ArenaPages ArenaPagesOfDir(const std::string& dir) {
  char real[PATH_MAX];
  if (realpath(dir.c_str(), real) == nullptr) return ArenaPages{};
  auto read = [](const char* path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  return ArenaPagesOf(read("/proc/self/mountinfo"), real, read("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
}

std::string ArenaPagesText(const ArenaPages& pages) {
  if (!pages.known) return "pages of unknown size (no mount found for the arena directory)";
  if (pages.huge) return fmt::format("huge pages (tmpfs huge={} at {})", pages.huge_option, pages.mount_point);
  const std::string why = pages.fs_type == "tmpfs"
                              ? fmt::format("the tmpfs at {} is mounted huge={}", pages.mount_point, pages.huge_option)
                              : fmt::format("{} at {} is not a tmpfs", pages.fs_type, pages.mount_point);
  return fmt::format("4 KiB pages ({}): every process that maps an arena faults and pins it page by page; "
                     "a tmpfs mounted with huge=within_size, named by FT_CKPT_ARENA_DIR, gives them huge pages "
                     "(docs/checkpoints.md, \"Arenas on huge pages\")", why);
}

}  // namespace ft::ckpt

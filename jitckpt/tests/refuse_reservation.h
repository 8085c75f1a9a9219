// Makes the next reservation of a deferred arena fail, as a full /dev/shm would: the
// descriptor the writer keeps for its reservations (Arena::ReserveSlot) is swapped for a
// read-only one of the same file, which posix_fallocate refuses with EBADF. false when the
// process holds no descriptor of `path` to swap.
#ifndef FT_JITCKPT_TESTS_REFUSE_RESERVATION_H_
#define FT_JITCKPT_TESTS_REFUSE_RESERVATION_H_

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace ft::ckpt::testing {

inline bool RefuseReservations(const std::string& path) {
  int kept = -1;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec) == std::filesystem::path(path)) {
      kept = std::stoi(e.path().filename().string());
    }
  }
  if (kept < 0) return false;
  const int read_only = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (read_only < 0) return false;
  const bool swapped = dup2(read_only, kept) == kept;
  close(read_only);
  return swapped;
}

}  // namespace ft::ckpt::testing

#endif  // FT_JITCKPT_TESTS_REFUSE_RESERVATION_H_

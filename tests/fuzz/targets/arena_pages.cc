// The mount table libft.so and ftworker read to say whether the arenas get huge pages
// (jitckpt/arena_pages.h, ArenaPagesOf over /proc/self/mountinfo). The kernel writes it, but its
// mount points are whatever anyone mounted (spaces, escapes, any byte): any text gives an answer,
// and a known one names a mount holding the directory; huge pages come from a tmpfs only.
#include <string>

#include "jitckpt/arena_pages.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
constexpr const char* kDir = "/dev/shm/ft arenas/x";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ft;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const ckpt::ArenaPages p = ckpt::ArenaPagesOf(text, kDir);
  const std::string said = ckpt::ArenaPagesText(p);
  FT_FUZZ_CHECK(!said.empty(), "no words for the page size");
  if (!p.known) {
    FT_FUZZ_CHECK(!p.huge && p.mount_point.empty(), "an unknown mount with an answer");
    fuzz::Rejected();
    return 0;
  }
  const std::string dir = kDir;
  const std::string& at = p.mount_point;
  FT_FUZZ_CHECK(at == "/" || (dir.compare(0, at.size(), at) == 0 && (dir.size() == at.size() || dir[at.size()] == '/')),
                "the mount " + at + " does not hold " + dir);
  FT_FUZZ_CHECK(!p.huge || p.fs_type == "tmpfs", "huge pages from a " + p.fs_type);
  fuzz::Accepted();
  return 0;
}

ft::fuzz::TargetInfo FuzzTargetInfo() {
  ft::fuzz::TargetInfo info;
  info.name = "arena_pages";
  info.seeds = {
      "28 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
      "25 28 0:23 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,inode64\n",
      "25 28 0:23 / /dev/shm rw - tmpfs tmpfs rw\n"
      "90 25 0:51 / /dev/shm/ft\\040arenas rw,relatime - tmpfs tmpfs rw,size=4g,huge=within_size\n",
  };
  info.mutate.tokens = {" ", "\n", "-", "/", "\\", "\\040", "\\134", "tmpfs", "ext4", "huge=", "huge=always",
                        "huge=advise", ",", "shared:1", "/dev/shm", "/dev/shm/ft arenas", "0", "\xff",
                        std::string(1, '\0')};
  info.mutate.max_edits = 4;
  info.random_max_bytes = 200;
  info.random_start = "25 28 0:23 / /dev";
  info.mutations = 30000;
  info.min_accepted = 3000;
  info.min_rejected = 100;
  return info;
}

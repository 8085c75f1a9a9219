// ft::ckpt::Arena: one rank's host checkpoint arena — a file in FT_CKPT_ARENA_DIR (default
// /dev/shm) that outlives the process, so a restarted rank on the same node, a same-node
// peer and ftworker find the last committed copy in memory.
//
//   name      <arena_dir>/ft-ckpt.<job>.<rank>     (job sanitized as segment names)
//   mode      0600, owned by the training user; readers check owner and size
//   offset 0  ArenaHeader (4 KiB)                  magic, version, geometry, commit word
//   4096      manifest region (manifest_capacity)  the committed manifest's bytes
//   data_off  data region (data_capacity)          aligned to 2 MiB (huge pages, O_DIRECT)
//
// Commit protocol (a seqlock over the whole copy): the writer calls BeginWrite (generation
// becomes odd, state kWriting), fills the data region, then Commit(manifest) writes the
// manifest bytes and publishes generation+1 (even) with state kCommitted, release. A reader
// takes ReadCommitted (manifest + generation, acquire), copies what it needs, then checks
// StillCommitted(generation): false means a new save overwrote the data meanwhile and the
// copy must be discarded. Chunk checksums catch what the generation cannot (a bad page).
//
// One writer (the rank's agent thread); any number of readers in other processes. The space
// is reserved up front with posix_fallocate, so a full /dev/shm is an error at creation,
// never a SIGBUS at save time.
#ifndef FT_JITCKPT_ARENA_H_
#define FT_JITCKPT_ARENA_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "jitckpt/manifest.h"

namespace ft::ckpt {

inline constexpr uint64_t kArenaMagic = 0x31414e4552414b43ull;  // "CKARENA1" read as bytes
inline constexpr uint32_t kArenaVersion = 1;
inline constexpr uint64_t kArenaDataAlign = 2ull << 20;

enum class ArenaState : uint32_t { kEmpty = 0, kWriting = 1, kCommitted = 2 };

class Arena {
 public:
  Arena() = default;
  ~Arena();  // unmaps; never removes the file
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Arena(Arena&&) noexcept;
  Arena& operator=(Arena&&) noexcept;

  static std::string PathFor(std::string_view arena_dir, std::string_view job, int rank);
  // Where ftworker keeps a copy of `rank`'s shard it pulled from another node before the rank
  // started (ftworker/prefetcher.h): <arena_dir>/ft-prefetch.<job>.<rank>. The same format as
  // the rank's own arena, which stays untouched; List (and so the keeper) never sees it.
  static std::string PrefetchPathFor(std::string_view arena_dir, std::string_view job, int rank);

  // Writer: opens the rank's arena, creating or resizing it to hold a manifest of
  // manifest_capacity bytes and data_bytes of data. An existing arena of exactly that geometry
  // keeps its committed copy (a restarted rank restores from it); any other is reset to
  // kEmpty. The whole file is reserved with posix_fallocate: IoError naming the directory and
  // the bytes missing when it does not fit (the file is then removed). Huge pages advised.
  static Status OpenForWrite(std::string_view arena_dir, std::string_view job, int rank,
                             uint64_t manifest_capacity, uint64_t data_bytes, Arena* out);
  // The same at an explicit path (the prefetch arena): same geometry rules, 0600, reserved up
  // front with the free space of the path's directory checked first.
  static Status OpenForWriteAt(const std::string& path, uint64_t manifest_capacity, uint64_t data_bytes,
                               Arena* out);
  // Reader (ftworker, a peer's ft_restore): maps read-only. Corrupt when the header is not a
  // valid arena or the file is shorter than its header claims or not owned by this user;
  // Unsupported, naming both versions, for an arena of another version; NotFound when there
  // is no such file.
  static Status OpenForRead(const std::string& path, Arena* out);

  bool is_open() const { return base_ != nullptr; }
  const std::string& path() const { return path_; }
  uint8_t* data() const;             // writer: the data region (pinned by the agent)
  uint64_t data_capacity() const;
  uint64_t mapped_bytes() const { return mapped_; }

  // Writer side of the commit protocol.
  void BeginWrite();
  Status Commit(const Manifest& m);  // InvalidArgument when the manifest does not fit

  // Reader side. NotFound when nothing is committed (empty, or a write in progress).
  Status ReadCommitted(Manifest* m, uint64_t* generation) const;
  bool StillCommitted(uint64_t generation) const;

  // Arena files of `job` in `arena_dir` (ftworker scans them), full paths, sorted by rank.
  static std::vector<std::string> List(std::string_view arena_dir, std::string_view job);
  // The rank of an arena path, or -1.
  static int RankOf(std::string_view path);

 private:
  // Takes a mapping whose geometry the caller wrote or validated.
  Arena(std::string path, uint8_t* base, bool writable, uint64_t mapped, uint64_t manifest_capacity,
        uint64_t data_offset, uint64_t data_capacity)
      : path_(std::move(path)), base_(base), mapped_(mapped), writable_(writable),
        manifest_capacity_(manifest_capacity), data_offset_(data_offset),
        data_capacity_(data_capacity) {}

  std::string path_;
  uint8_t* base_ = nullptr;
  uint64_t mapped_ = 0;
  bool writable_ = false;
  // The geometry as validated at open: a reader never re-reads it from the shared header.
  uint64_t manifest_capacity_ = 0;
  uint64_t data_offset_ = 0;
  uint64_t data_capacity_ = 0;
};

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_ARENA_H_

// Checkpoint test helpers: temporary directories, and committed copies written into a rank's
// arena with the Arena API exactly as libft.so's agent writes them (no process needed).
#ifndef FT_FTWORKER_TESTS_CKPT_TEST_UTIL_H_
#define FT_FTWORKER_TESTS_CKPT_TEST_UTIL_H_

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"

namespace ft::worker::testing {

// A fresh directory under the temporary directory, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& what) {
    std::string tmpl = std::filesystem::temp_directory_path().string() + "/ft-" + what + ".XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    char* made = mkdtemp(buf.data());
    EXPECT_NE(made, nullptr) << std::strerror(errno);
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const {
    std::string p = path_ + "/" + name;
    std::filesystem::create_directories(p);
    return p;
  }

 private:
  std::string path_;
};

// One rank's arena holding `bytes` of state in one buffer "w", cut in chunks of `chunk`, in
// `slots` slots (the agent's default is two).
class FakeArena {
 public:
  FakeArena(const std::string& dir, const std::string& job, int rank, uint64_t bytes,
            uint64_t chunk = 1 << 20, int slots = 2)
      : job_(job), rank_(rank), chunk_(chunk) {
    std::vector<ckpt::BufferEntry> named{{"w", bytes, 0}};
    Status s = ckpt::PlanLayout(named, &layout_, &data_bytes_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    s = ckpt::Arena::OpenForWrite(dir, job, rank, ckpt::ManifestCapacity(layout_, data_bytes_, chunk_),
                                  data_bytes_, slots, &arena_);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  // A committed copy of `step` whose bytes are all `fill`; returns its manifest.
  ckpt::Manifest Save(int64_t step, uint8_t fill, bool torn = false) {
    std::memset(arena_.BeginWrite(), fill, data_bytes_);
    ckpt::Manifest m = ManifestOf(step, torn);
    Status s = arena_.Commit(m);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return m;
  }
  // A save that started and has not committed (with one slot the previous copy is being
  // overwritten; with two it stays).
  void BeginSave() { arena_.BeginWrite(); }

  ckpt::Manifest ManifestOf(int64_t step, bool torn = false) const {
    ckpt::Manifest m;
    m.job = job_;
    m.rank = rank_;
    m.world_size = world_size;
    m.tp = 0;
    m.pp = rank_ % 2;
    m.dp = rank_ / 2;
    m.step = step;
    m.torn = torn;
    m.created_unix_ns = 1'700'000'000'000'000'000ull;
    m.chunk_bytes = chunk_;
    m.data_bytes = data_bytes_;
    m.buffers = layout_;
    for (uint64_t off = 0; off < data_bytes_; off += chunk_) {
      m.chunk_checksums.push_back(
          ckpt::Checksum(arena_.write_data() + off, std::min<uint64_t>(chunk_, data_bytes_ - off)));
    }
    return m;
  }

  ckpt::Arena& arena() { return arena_; }
  // The committed copy's data (nullptr when none).
  const uint8_t* committed_data() const {
    ckpt::Manifest m;
    uint64_t generation = 0;
    return arena_.ReadCommitted(&m, &generation).ok() ? arena_.data(generation) : nullptr;
  }
  const std::string& path() const { return arena_.path(); }

  int world_size = 8;  // what the manifests of the next saves say

 private:
  std::string job_;
  int rank_;
  uint64_t chunk_;
  std::vector<ckpt::BufferEntry> layout_;
  uint64_t data_bytes_ = 0;
  ckpt::Arena arena_;
};

}  // namespace ft::worker::testing

#endif  // FT_FTWORKER_TESTS_CKPT_TEST_UTIL_H_

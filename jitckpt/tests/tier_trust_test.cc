// What sits at the paths the tiers and the plan reader open is never trusted: a FIFO returns at
// once with a clear error (it would block an open forever), a symlink or a file or directory of
// another user is refused. Each call runs on its own thread under a deadline; a call that
// blocks is released by opening the FIFO's other end, and the test fails.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>

#include "jitckpt/file_ops.h"
#include "jitckpt/node_plan.h"
#include "jitckpt/tests/sample_manifest.h"
#include "jitckpt/tests/temp_dir.h"
#include "jitckpt/tests/tier_test_util.h"
#include "jitckpt/tier.h"

namespace ft::ckpt {
namespace {

using namespace std::chrono_literals;
using testing::AlignedBytes;
using testing::AlignedCopy;
using testing::SampleManifest;
using testing::TempDir;

constexpr uid_t kOtherUid = 4242;

// Runs `call` on a thread and waits up to 10 s (a loaded 2-core machine returns in
// microseconds). When it has not returned, whatever FIFOs are listed are opened for writing
// and closed again, which wakes a reader blocked in open() or read(), and *blocked is set.
Status WithinDeadline(const std::function<Status()>& call, const std::vector<std::string>& fifos,
                      bool* blocked) {
  auto result = std::async(std::launch::async, call);
  *blocked = result.wait_for(10s) != std::future_status::ready;
  while (result.wait_for(50ms) != std::future_status::ready) {
    for (const std::string& fifo : fifos) {
      int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
    }
  }
  return result.get();
}

class TierTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path() + "/ckpt";
    m_ = SampleManifest(&data_, {5000, 8192, 123}, 4096);
    aligned_ = AlignedCopy(data_, 2 << 20);
    ASSERT_TRUE(PersistCopy(TierKind::kLocal, dir_, m_, aligned_.get(), nullptr, nullptr).ok());
  }
  CopyId Id() const { return {m_.step, m_.rank}; }
  std::string DataFile() const { return DataPath(dir_, m_.job, Id()); }
  std::string ManifestFile() const { return ManifestPath(dir_, m_.job, Id()); }
  std::string JobDir() const { return dir_ + "/" + m_.job; }
  void ReplaceWithFifo(const std::string& path) {
    ASSERT_EQ(::unlink(path.c_str()), 0);
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  }

  TempDir scratch_{"/tmp"};
  std::string dir_;
  std::vector<uint8_t> data_;
  Manifest m_;
  AlignedBytes aligned_;
};

TEST_F(TierTrustTest, FifoAtTheManifestPathIsRefusedAtOnce) {
  ReplaceWithFifo(ManifestFile());
  bool blocked = false;
  Manifest m;
  Status s = WithinDeadline([&] { return ReadManifest(dir_, m_.job, Id(), &m); }, {ManifestFile()}, &blocked);
  EXPECT_FALSE(blocked) << "ReadManifest blocked on a FIFO";
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("not a regular file"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find(ManifestFile()), std::string_view::npos) << s.ToString();
}

TEST_F(TierTrustTest, FifoAtTheDataPathIsRefusedAtOnceByBothReaders) {
  ReplaceWithFifo(DataFile());
  std::vector<uint8_t> back(m_.data_bytes);
  bool blocked = false;
  Status s = WithinDeadline([&] { return ReadData(dir_, m_.job, m_, back.data(), back.size()); },
                            {DataFile()}, &blocked);
  EXPECT_FALSE(blocked) << "ReadData blocked on a FIFO";
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  // Into an aligned destination ReadData tries O_DIRECT first: the same refusal.
  AlignedBytes dest = AlignedCopy(std::vector<uint8_t>(m_.data_bytes), 4096);
  s = WithinDeadline([&] { return ReadData(dir_, m_.job, m_, dest.get(), m_.data_bytes); }, {DataFile()},
                     &blocked);
  EXPECT_FALSE(blocked) << "ReadData (direct) blocked on a FIFO";
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  s = WithinDeadline([&] { return ReadDataRange(dir_, m_.job, m_, 0, m_.chunk_bytes, back.data()); },
                     {DataFile()}, &blocked);
  EXPECT_FALSE(blocked) << "ReadDataRange blocked on a FIFO";
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("not a regular file"), std::string_view::npos) << s.ToString();
}

TEST_F(TierTrustTest, FifoAtThePlanPathIsRefusedAtOnce) {
  const std::string path = scratch_.File("ft-plan.job-a.node-1");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  bool blocked = false;
  NodePlan plan;
  Status s = WithinDeadline([&] { return ReadNodePlan(path, &plan); }, {path}, &blocked);
  EXPECT_FALSE(blocked) << "ReadNodePlan blocked on a FIFO";
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("not a regular file"), std::string_view::npos) << s.ToString();
}

TEST_F(TierTrustTest, FilesOfAnotherUserAreRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a file away needs root";
  ASSERT_EQ(::chown(ManifestFile().c_str(), kOtherUid, kOtherUid), 0);
  Manifest m;
  Status s = ReadManifest(dir_, m_.job, Id(), &m);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("owned by uid 4242"), std::string_view::npos) << s.ToString();
  ASSERT_EQ(::chown(ManifestFile().c_str(), geteuid(), getegid()), 0);
  ASSERT_EQ(::chown(DataFile().c_str(), kOtherUid, kOtherUid), 0);
  std::vector<uint8_t> back(m_.data_bytes);
  s = ReadData(dir_, m_.job, m_, back.data(), back.size());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("owned by uid 4242"), std::string_view::npos) << s.ToString();
  s = ReadDataRange(dir_, m_.job, m_, 0, m_.chunk_bytes, back.data());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
}

TEST_F(TierTrustTest, SymlinkedFilesAreRefused) {
  const std::string real = scratch_.File("elsewhere.manifest");
  std::filesystem::rename(ManifestFile(), real);
  std::filesystem::create_symlink(real, ManifestFile());
  Manifest m;
  Status s = ReadManifest(dir_, m_.job, Id(), &m);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("symbolic link"), std::string_view::npos) << s.ToString();
}

// <dir>/<job> made by another user (a shared file system where someone else took the name
// first): nothing is written into it, nothing read from it, and the error says what to do.
TEST_F(TierTrustTest, JobDirectoryOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a directory away needs root";
  ASSERT_EQ(::chown(JobDir().c_str(), kOtherUid, kOtherUid), 0);
  Manifest next = m_;
  next.step = m_.step + 100;
  Status s = PersistCopy(TierKind::kRemote, dir_, next, aligned_.get(), nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find(JobDir()), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("owned by uid 4242"), std::string_view::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(StepDir(dir_, m_.job, next.step)));
  Manifest m;
  s = ReadManifest(dir_, m_.job, Id(), &m);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("owned by uid 4242"), std::string_view::npos) << s.ToString();
  EXPECT_TRUE(ListCommitted(dir_, m_.job).empty());
  std::vector<uint8_t> back(m_.data_bytes);
  EXPECT_EQ(ReadData(dir_, m_.job, m_, back.data(), back.size()).code(), StatusCode::kCorrupt);
}

TEST_F(TierTrustTest, StepDirectoryOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a directory away needs root";
  ASSERT_EQ(::chown(StepDir(dir_, m_.job, m_.step).c_str(), kOtherUid, kOtherUid), 0);
  Manifest m;
  Status s = ReadManifest(dir_, m_.job, Id(), &m);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("owned by uid 4242"), std::string_view::npos) << s.ToString();
  EXPECT_TRUE(ListCommitted(dir_, m_.job).empty());
  Manifest again = m_;
  again.rank = m_.rank + 1;
  s = PersistCopy(TierKind::kRemote, dir_, again, aligned_.get(), nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(DataPath(dir_, m_.job, {again.step, again.rank})));
}

// <dir>/<job> a symlink to another directory: refused by writers and readers alike, and the
// directory it points at is left as it was.
TEST_F(TierTrustTest, SymlinkedJobDirectoryIsRefused) {
  const std::string real = scratch_.File("elsewhere");
  std::filesystem::rename(JobDir(), real);
  std::filesystem::create_symlink(real, JobDir());
  EXPECT_TRUE(ListCommitted(dir_, m_.job).empty());
  Manifest m;
  Status s = ReadManifest(dir_, m_.job, Id(), &m);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find("symbolic link"), std::string_view::npos) << s.ToString();
  Manifest next = m_;
  next.step = m_.step + 100;
  s = PersistCopy(TierKind::kRemote, dir_, next, aligned_.get(), nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find("symbolic link"), std::string_view::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(real + "/step-000000001300"));
  int removed = -1;
  EXPECT_FALSE(CleanUncommitted(dir_, m_.job, &removed).ok());
  EXPECT_TRUE(std::filesystem::exists(real + "/step-000000001200/rank-000003.manifest"));
}

}  // namespace
}  // namespace ft::ckpt

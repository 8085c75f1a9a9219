#include "jitckpt/tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <map>

#include "jitckpt/file_ops.h"
#include "common/job_name.h"
#include "jitckpt/safe_name.h"
#include "jitckpt/tests/sample_manifest.h"
#include "jitckpt/tests/temp_dir.h"
#include "jitckpt/tests/tier_test_util.h"

namespace ft::ckpt {
namespace {

using testing::AlignedBytes;
using testing::AlignedCopy;
using testing::LogCapture;
using testing::FilesUnder;
using testing::FlipBitInFile;
using testing::SampleManifest;
using testing::TempDir;

// The real calls, with what the tier asked for recorded and faults injected on demand. O_DIRECT
// is recorded and its alignment rule enforced here (EINVAL, as the kernel does), then dropped
// from the real open: the test's file system need not support it.
class RecordingOps : public FileOps {
 public:
  struct WriteCall {
    const void* data;
    size_t bytes;
    bool direct;
  };

  int Open(const char* path, int flags, mode_t mode) override {
    const bool direct = (flags & O_DIRECT) != 0;
    if (direct) ++direct_opens;
    if (direct && refuse_direct_open) {
      errno = EINVAL;
      return -1;
    }
    int fd = FileOps::Open(path, flags & ~O_DIRECT, mode);
    if (fd >= 0) direct_fds[fd] = direct;
    return fd;
  }
  ssize_t Write(int fd, const void* data, size_t bytes) override {
    const bool direct = direct_fds[fd];
    writes.push_back({data, bytes, direct});
    if (static_cast<int>(writes.size()) == fail_write_at) {
      errno = fail_errno;
      return -1;
    }
    if (direct && (refuse_direct_write || reinterpret_cast<uintptr_t>(data) % 4096 != 0 ||
                   bytes % 4096 != 0)) {
      errno = EINVAL;
      return -1;
    }
    return FileOps::Write(fd, data, bytes);
  }
  int Fsync(int fd) override {
    if (++fsyncs == fail_fsync_at) {
      errno = EIO;
      return -1;
    }
    return FileOps::Fsync(fd);
  }
  int Close(int fd) override {
    direct_fds.erase(fd);
    return FileOps::Close(fd);
  }
  int Rename(const char* from, const char* to) override {
    if (++renames == fail_rename_at) {
      errno = EXDEV;
      return -1;
    }
    return FileOps::Rename(from, to);
  }

  bool refuse_direct_open = false;
  bool refuse_direct_write = false;
  int fail_write_at = 0;  // 1-based; 0: never
  int fail_errno = ENOSPC;
  int fail_fsync_at = 0;
  int fail_rename_at = 0;

  std::vector<WriteCall> writes;
  int direct_opens = 0;
  int fsyncs = 0;
  int renames = 0;
  std::map<int, bool> direct_fds;
};

class TierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    dir_ = scratch_.path() + "/ckpt";
    // 3 buffers over 5 chunks of 4 KiB: data_bytes is a multiple of 4096, as in an arena.
    m_ = SampleManifest(&data_, {5000, 8192, 123}, 4096);
    ASSERT_EQ(m_.data_bytes % 4096, 0u);
    ASSERT_GT(m_.chunk_count(), 3u);
    aligned_ = AlignedCopy(data_, 2 << 20);
  }

  Status Persist(FileOps& ops, TierKind kind, const uint8_t* data, PersistStats* stats = nullptr,
                 std::function<bool()> still_valid = nullptr) {
    return PersistCopy(ops, kind, dir_, m_, data, still_valid, stats);
  }

  // Reads the copy back and compares it with what was persisted.
  void ExpectReadsBack(const Manifest& m, const std::vector<uint8_t>& data) {
    Manifest read;
    ASSERT_TRUE(ReadManifest(dir_, m.job, {m.step, m.rank}, &read).ok());
    EXPECT_EQ(read, m);
    std::vector<uint8_t> back(m.data_bytes);
    Status st = ReadData(dir_, m.job, read, back.data(), back.size());
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(back, data);
  }

  std::string DataFile() const { return DataPath(dir_, m_.job, {m_.step, m_.rank}); }
  std::string ManifestFile() const { return ManifestPath(dir_, m_.job, {m_.step, m_.rank}); }

  TempDir scratch_{"/tmp"};  // a disk, where O_DIRECT is real
  std::string dir_;
  std::vector<uint8_t> data_;
  Manifest m_;
  AlignedBytes aligned_;
};

TEST_F(TierTest, PathsNameStepAndRankZeroPaddedAndKeepTheJobOneComponent) {
  EXPECT_EQ(StepDir("/d", "job-a", 42), "/d/job-a/step-000000000042");
  EXPECT_EQ(DataPath("/d", "job-a", {42, 7}), "/d/job-a/step-000000000042/rank-000007.data");
  EXPECT_EQ(ManifestPath("/d", "job-a", {42, 7}),
            "/d/job-a/step-000000000042/rank-000007.manifest");
  EXPECT_EQ(StepDir("/d/", "job-a", 42), "/d/job-a/step-000000000042");
  // A job name never climbs out of the directory or adds one; it is spelled as in the
  // arenas' file names.
  EXPECT_EQ(StepDir("/d", "../x/y", 1), "/d/" + JobToken("../x/y") + "/step-000000000001");
  EXPECT_EQ(JobToken("../x/y").substr(0, 7), "___x_y-");
  EXPECT_EQ(StepDir("/d", "..", 1), "/d/" + JobToken("..") + "/step-000000000001");
  EXPECT_EQ(StepDir("/d", "", 1), "/d/" + JobToken("") + "/step-000000000001");
  EXPECT_STREQ(TierName(TierKind::kLocal), "local");
  EXPECT_STREQ(TierName(TierKind::kRemote), "remote");
}

// What the tier recognises in a directory is exactly what it writes: a stray "step-5" or
// "rank-1.data.bak" is never a step or a copy, and a temp's host and pid are read back.
TEST_F(TierTest, NamesParseBackOnlyInTheSpellingTheTierWrites) {
  int64_t step = -1;
  EXPECT_TRUE(internal::ParseStepDirName("step-000000000042", &step));
  EXPECT_EQ(step, 42);
  for (std::string_view bad : {"step-42", "step-0000000000042", "step-00000000004x", "step-", "steps-000000000042"}) {
    EXPECT_FALSE(internal::ParseStepDirName(bad, &step)) << bad;
  }
  int rank = -1;
  EXPECT_TRUE(internal::ParseRankFileName(internal::RankFileName(7, internal::kDataSuffix), internal::kDataSuffix,
                                          &rank));
  EXPECT_EQ(rank, 7);
  EXPECT_TRUE(internal::ParseRankFileName("rank-000012.manifest", internal::kManifestSuffix, &rank));
  EXPECT_EQ(rank, 12);
  for (std::string_view bad : {"rank-7.data", "rank-000007.data.bak", "rank-000007.manifest", "rank-.data"}) {
    EXPECT_FALSE(internal::ParseRankFileName(bad, internal::kDataSuffix, &rank)) << bad;
  }
  const std::string temp = internal::RankFileName(3, internal::kManifestSuffix) + internal::TempSuffix();
  EXPECT_TRUE(internal::IsTempName(temp));
  std::string_view host;
  pid_t pid = 0;
  ASSERT_TRUE(internal::ParseTempName(temp, &host, &pid));
  EXPECT_EQ(host, internal::ThisHost());
  EXPECT_EQ(pid, ::getpid());
  EXPECT_EQ(internal::TempTarget(temp), "rank-000003.manifest");
  for (std::string_view bad : {"rank-000003.data.tmp.host", "rank-000003.data.tmp.host.0", "rank-000003.data.tmp..12",
                               "rank-000003.data.tmp.host.1x", "rank-000003.data"}) {
    EXPECT_FALSE(internal::ParseTempName(bad, &host, &pid)) << bad;
  }
}

TEST_F(TierTest, LocalTierWritesWholeAlignedBlocksStraightFromTheArena) {
  RecordingOps ops;
  PersistStats stats;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, aligned_.get(), &stats).ok());
  EXPECT_TRUE(stats.direct_io);
  EXPECT_EQ(stats.bytes, m_.data_bytes);
  EXPECT_GE(stats.seconds, 0.0);
  uint64_t direct_bytes = 0;
  for (const auto& w : ops.writes) {
    if (!w.direct) continue;
    direct_bytes += w.bytes;
    // No bounce copy: the writes come from the caller's buffer itself.
    const auto* p = static_cast<const uint8_t*>(w.data);
    EXPECT_TRUE(p >= aligned_.get() && p + w.bytes <= aligned_.get() + m_.data_bytes);
  }
  EXPECT_EQ(direct_bytes, m_.data_bytes);
  ExpectReadsBack(m_, data_);
  EXPECT_EQ(FilesUnder(dir_), (std::vector<std::string>{"job-a/step-000000001200/rank-000003.data",
                                                        "job-a/step-000000001200/rank-000003.manifest"}));
  struct stat st;
  ASSERT_EQ(::stat(DataFile().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(TierTest, LocalTierBouncesAnUnalignedSourceThroughAnAlignedBuffer) {
  AlignedBytes unaligned = AlignedCopy(data_, 4096, 8);
  RecordingOps ops;
  PersistStats stats;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, unaligned.get() + 8, &stats).ok());
  EXPECT_TRUE(stats.direct_io);
  size_t direct_writes = 0;
  for (const auto& w : ops.writes) {
    if (!w.direct) continue;
    ++direct_writes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data) % 4096, 0u);
  }
  EXPECT_GT(direct_writes, 0u);
  ExpectReadsBack(m_, data_);
}

TEST_F(TierTest, LocalTierUsesODirectOnARealFileSystemThatOffersIt) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  // Whether this file system takes O_DIRECT decides what the tier must report.
  const std::string probe = dir_ + "/probe";
  int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0600);
  const bool offered = fd >= 0;
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  PersistStats stats;
  ASSERT_TRUE(PersistCopy(TierKind::kLocal, dir_, m_, aligned_.get(), nullptr, &stats).ok());
  EXPECT_EQ(stats.direct_io, offered);
  ExpectReadsBack(m_, data_);
}

TEST_F(TierTest, RefusedODirectFallsBackToBufferedWritesAndSaysSoOnce) {
  LogCapture log;
  for (bool at_open : {true, false}) {
    SCOPED_TRACE(at_open ? "refused at open" : "refused at write");
    RecordingOps ops;
    ops.refuse_direct_open = at_open;
    ops.refuse_direct_write = !at_open;
    PersistStats stats;
    Status st = Persist(ops, TierKind::kLocal, aligned_.get(), &stats);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_FALSE(stats.direct_io);
    EXPECT_GT(ops.direct_opens, 0);
    ExpectReadsBack(m_, data_);
    EXPECT_EQ(FilesUnder(dir_).size(), 2u);
  }
  // Once per process, however many persists meet it (ctest runs each test in its own process).
  EXPECT_EQ(log.Count({"I ft[ckpt]", "refuses O_DIRECT", "page cache"}), 1u);
}

TEST_F(TierTest, RemoteTierWritesBufferedInChunksOfAtMost4MiB) {
  std::vector<uint8_t> big;
  m_ = SampleManifest(&big, {(9u << 20) + 100}, 4u << 20);
  AlignedBytes src = AlignedCopy(big, 2 << 20);
  RecordingOps ops;
  PersistStats stats;
  ASSERT_TRUE(Persist(ops, TierKind::kRemote, src.get(), &stats).ok());
  EXPECT_FALSE(stats.direct_io);
  EXPECT_EQ(ops.direct_opens, 0);
  uint64_t total = 0;
  for (const auto& w : ops.writes) {
    EXPECT_LE(w.bytes, 4u << 20);
    total += w.bytes;
  }
  EXPECT_GT(ops.writes.size(), 3u);
  EXPECT_EQ(total, m_.data_bytes + EncodeManifest(m_).size());
  ExpectReadsBack(m_, big);
}

// Pages of [0, bytes) of `path` in the page cache.
size_t ResidentPages(const std::string& path, uint64_t bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SIZE_MAX;
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return SIZE_MAX;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  size_t resident = SIZE_MAX;
  if (::mincore(map, bytes, in_core.data()) == 0) {
    resident = 0;
    for (unsigned char c : in_core) resident += c & 1;
  }
  ::munmap(map, bytes);
  return resident;
}

TEST_F(TierTest, BufferedWritesLeaveTheirPagesToTheRestOfTheNode) {
  struct statfs fs;
  ASSERT_EQ(::statfs(scratch_.path().c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "tmpfs pages are the file: nothing to drop";
  std::vector<uint8_t> big;
  m_ = SampleManifest(&big, {96u << 20}, 4u << 20);
  AlignedBytes src = AlignedCopy(big, 2 << 20);
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kRemote, src.get()).ok());
  // The first 32 MiB were written back and dropped while the rest was written.
  const uint64_t first = 32u << 20;
  const size_t resident = ResidentPages(DataFile(), first);
  const size_t pages = first / static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_LT(resident, pages / 10) << resident << " of " << pages << " pages still cached";
  ExpectReadsBack(m_, big);
}

TEST_F(TierTest, DiskFullAtAnyWriteIsAnIoErrorThatLeavesNothingBehindAndTheSourceUntouched) {
  const std::string base = dir_;
  for (TierKind kind : {TierKind::kLocal, TierKind::kRemote}) {
    // How many writes a whole persist makes, then a full disk at each one of them in turn.
    dir_ = fmt::format("{}-{}-count", base, TierName(kind));
    RecordingOps counting;
    ASSERT_TRUE(Persist(counting, kind, aligned_.get()).ok());
    const int writes = static_cast<int>(counting.writes.size());
    ASSERT_GE(writes, 2);  // data and manifest
    for (int n = 1; n <= writes; ++n) {
      SCOPED_TRACE(fmt::format("{} tier, write {} of {} fails", TierName(kind), n, writes));
      dir_ = fmt::format("{}-{}-{}", base, TierName(kind), n);
      RecordingOps ops;
      ops.fail_write_at = n;
      Status st = Persist(ops, kind, aligned_.get());
      EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
      EXPECT_NE(st.message().find("No space left on device"), std::string_view::npos) << st.ToString();
      EXPECT_NE(st.message().find(StepDir(dir_, m_.job, m_.step)), std::string_view::npos)
          << st.ToString();
      EXPECT_EQ(FilesUnder(dir_), std::vector<std::string>{});
      EXPECT_TRUE(ListCommitted(dir_, m_.job).empty());
      EXPECT_EQ(std::memcmp(aligned_.get(), data_.data(), data_.size()), 0);
    }
  }
}

TEST_F(TierTest, FailedFsyncOrRenameLeavesNoCopyEither) {
  const std::string base = dir_;
  dir_ = base + "-count";
  RecordingOps counting;
  ASSERT_TRUE(Persist(counting, TierKind::kLocal, aligned_.get()).ok());
  ASSERT_GE(counting.fsyncs, 4);  // data, its directory, manifest, its directory
  ASSERT_EQ(counting.renames, 2);
  for (int n = 1; n <= counting.fsyncs; ++n) {
    SCOPED_TRACE(fmt::format("fsync {} of {} fails", n, counting.fsyncs));
    dir_ = fmt::format("{}-fsync-{}", base, n);
    RecordingOps ops;
    ops.fail_fsync_at = n;
    Status st = Persist(ops, TierKind::kLocal, aligned_.get());
    EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
    EXPECT_NE(st.message().find("Input/output error"), std::string_view::npos) << st.ToString();
    EXPECT_EQ(FilesUnder(dir_), std::vector<std::string>{});
  }
  for (int n = 1; n <= counting.renames; ++n) {
    SCOPED_TRACE(fmt::format("rename {} of {} fails", n, counting.renames));
    dir_ = fmt::format("{}-rename-{}", base, n);
    RecordingOps ops;
    ops.fail_rename_at = n;
    Status st = Persist(ops, TierKind::kLocal, aligned_.get());
    EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
    EXPECT_NE(st.message().find("Invalid cross-device link"), std::string_view::npos);
    EXPECT_EQ(FilesUnder(dir_), std::vector<std::string>{});
  }
}

TEST_F(TierTest, ArenaOverwrittenDuringPersistAbandonsTheCopyAndKeepsTheEarlierOne) {
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, aligned_.get()).ok());
  // A second persist of the same (step, rank) whose source changed meanwhile.
  Manifest newer = m_;
  newer.torn = true;
  bool asked = false;
  Status st = PersistCopy(ops, TierKind::kLocal, dir_, newer, aligned_.get(),
                          [&] { asked = true; return false; }, nullptr);
  EXPECT_TRUE(asked);
  EXPECT_EQ(st.code(), StatusCode::kNotReady) << st.ToString();
  EXPECT_EQ(FilesUnder(dir_).size(), 2u);  // no temp left
  ExpectReadsBack(m_, data_);
}

std::string ThisHostTag() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return SafeNodeName(name);
}

TEST_F(TierTest, TempFilesCarryHostAndPidUntilTheRenames) {
  RecordingOps ops;
  std::vector<std::string> while_writing;
  ASSERT_TRUE(Persist(ops, TierKind::kRemote, aligned_.get(), nullptr, [&] {
                while_writing = FilesUnder(dir_);
                return true;
              }).ok());
  const std::string tag = fmt::format(".tmp.{}.{}", ThisHostTag(), ::getpid());
  EXPECT_EQ(while_writing,
            (std::vector<std::string>{"job-a/step-000000001200/rank-000003.data" + tag,
                                      "job-a/step-000000001200/rank-000003.manifest" + tag}));
  EXPECT_EQ(FilesUnder(dir_).size(), 2u);
}

TEST_F(TierTest, StillValidFalseOnAFreshCopyLeavesNoFiles) {
  RecordingOps ops;
  Status st = Persist(ops, TierKind::kRemote, aligned_.get(), nullptr, [] { return false; });
  EXPECT_EQ(st.code(), StatusCode::kNotReady);
  EXPECT_EQ(FilesUnder(dir_), std::vector<std::string>{});
}

TEST_F(TierTest, PersistingACopyAgainReplacesIt) {
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, aligned_.get()).ok());
  std::vector<uint8_t> other;
  Manifest m2 = SampleManifest(&other, {5000, 8192, 123}, 4096, /*seed=*/9);
  AlignedBytes src = AlignedCopy(other, 4096);
  ASSERT_TRUE(PersistCopy(ops, TierKind::kLocal, dir_, m2, src.get(), nullptr, nullptr).ok());
  ExpectReadsBack(m2, other);
  EXPECT_EQ(FilesUnder(dir_).size(), 2u);
}

TEST_F(TierTest, BadArgumentsAreRefused) {
  RecordingOps ops;
  Manifest no_step = m_;
  no_step.step = -1;
  EXPECT_EQ(PersistCopy(ops, TierKind::kLocal, dir_, no_step, aligned_.get(), nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PersistCopy(ops, TierKind::kLocal, dir_, m_, nullptr, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PersistCopy(ops, TierKind::kLocal, "", m_, aligned_.get(), nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ops.writes.empty());
}

TEST_F(TierTest, ACorruptedChunkIsNamedWithItsFile) {
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, aligned_.get()).ok());
  ASSERT_TRUE(FlipBitInFile(DataFile(), m_.chunk_begin(2) + 17));
  // Into an arena-like aligned buffer (O_DIRECT reads) and into any other (buffered reads).
  for (size_t offset : {0, 8}) {
    SCOPED_TRACE(offset == 0 ? "aligned destination" : "unaligned destination");
    AlignedBytes back = AlignedCopy(std::vector<uint8_t>(m_.data_bytes), 2 << 20, offset);
    Status st = ReadData(dir_, m_.job, m_, back.get() + offset, m_.data_bytes);
    EXPECT_EQ(st.code(), StatusCode::kCorrupt);
    EXPECT_NE(st.message().find("chunk 2 "), std::string_view::npos) << st.ToString();
    EXPECT_NE(st.message().find(DataFile()), std::string_view::npos) << st.ToString();
    // The chunks before it landed and verified; the bad one is reported, never passed on.
    EXPECT_EQ(std::memcmp(back.get() + offset, data_.data(), m_.chunk_end(1)), 0);
  }
}

TEST_F(TierTest, ReadDataReadsIntoAlignedAndUnalignedDestinations) {
  RecordingOps ops;
  std::vector<uint8_t> big;
  m_ = SampleManifest(&big, {(70u << 20) + 5}, 4u << 20);  // more than one 64 MiB read
  AlignedBytes src = AlignedCopy(big, 2 << 20);
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, src.get()).ok());
  for (size_t offset : {0, 8}) {
    SCOPED_TRACE(offset == 0 ? "aligned destination" : "unaligned destination");
    AlignedBytes back = AlignedCopy(std::vector<uint8_t>(m_.data_bytes), 2 << 20, offset);
    Status st = ReadData(dir_, m_.job, m_, back.get() + offset, m_.data_bytes);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(std::memcmp(back.get() + offset, big.data(), big.size()), 0);
  }
}

TEST_F(TierTest, ATruncatedOrMissingDataFileIsNeverAShortSuccess) {
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, aligned_.get()).ok());
  std::vector<uint8_t> back(m_.data_bytes);
  ASSERT_EQ(::truncate(DataFile().c_str(), static_cast<off_t>(m_.data_bytes - 4096)), 0);
  Status st = ReadData(dir_, m_.job, m_, back.data(), back.size());
  EXPECT_TRUE(st.code() == StatusCode::kCorrupt || st.code() == StatusCode::kIoError) << st.ToString();
  EXPECT_NE(st.message().find("truncated"), std::string_view::npos) << st.ToString();
  ASSERT_EQ(::truncate(DataFile().c_str(), 0), 0);
  EXPECT_FALSE(ReadData(dir_, m_.job, m_, back.data(), back.size()).ok());
  ASSERT_EQ(::unlink(DataFile().c_str()), 0);
  EXPECT_EQ(ReadData(dir_, m_.job, m_, back.data(), back.size()).code(), StatusCode::kNotFound);
}

TEST_F(TierTest, ReadDataRefusesADestinationTooSmall) {
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, aligned_.get()).ok());
  std::vector<uint8_t> back(m_.data_bytes - 1);
  EXPECT_EQ(ReadData(dir_, m_.job, m_, back.data(), back.size()).code(), StatusCode::kInvalidArgument);
}

TEST_F(TierTest, ReadDataRangeReadsWholeChunksAndVerifiesThem) {
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kRemote, aligned_.get()).ok());
  // Chunks 1 and 2, then the last chunk alone.
  std::vector<uint8_t> back(2 * m_.chunk_bytes);
  Status st = ReadDataRange(dir_, m_.job, m_, m_.chunk_begin(1), back.size(), back.data());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(std::memcmp(back.data(), data_.data() + m_.chunk_begin(1), back.size()), 0);
  const size_t last = m_.chunk_count() - 1;
  std::vector<uint8_t> tail(m_.chunk_end(last) - m_.chunk_begin(last));
  ASSERT_TRUE(ReadDataRange(dir_, m_.job, m_, m_.chunk_begin(last), tail.size(), tail.data()).ok());
  EXPECT_EQ(std::memcmp(tail.data(), data_.data() + m_.chunk_begin(last), tail.size()), 0);

  // Not whole chunks, or beyond the data: refused before anything is read.
  EXPECT_EQ(ReadDataRange(dir_, m_.job, m_, 100, 4096, back.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadDataRange(dir_, m_.job, m_, 0, 100, back.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadDataRange(dir_, m_.job, m_, m_.data_bytes, 4096, back.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadDataRange(dir_, m_.job, m_, 0, 0, back.data()).code(), StatusCode::kInvalidArgument);

  // A bad bit in chunk 2 fails a range holding it, and only such a range.
  ASSERT_TRUE(FlipBitInFile(DataFile(), m_.chunk_begin(2) + 5));
  st = ReadDataRange(dir_, m_.job, m_, m_.chunk_begin(1), back.size(), back.data());
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.message().find("chunk 2 "), std::string_view::npos) << st.ToString();
  EXPECT_TRUE(ReadDataRange(dir_, m_.job, m_, 0, m_.chunk_bytes, back.data()).ok());

  ASSERT_EQ(::unlink(DataFile().c_str()), 0);
  EXPECT_EQ(ReadDataRange(dir_, m_.job, m_, 0, m_.chunk_bytes, back.data()).code(), StatusCode::kNotFound);
}

TEST_F(TierTest, ReadDataRangeTakesAShorterLastChunk) {
  RecordingOps ops;
  m_ = SampleManifest(&data_, {5000, 8192, 123}, 8192);  // 20480 bytes: chunks of 8, 8, 4 KiB
  ASSERT_NE(m_.data_bytes % m_.chunk_bytes, 0u);
  aligned_ = AlignedCopy(data_, 2 << 20);
  ASSERT_TRUE(Persist(ops, TierKind::kRemote, aligned_.get()).ok());
  std::vector<uint8_t> back(m_.data_bytes - m_.chunk_bytes);
  Status st = ReadDataRange(dir_, m_.job, m_, m_.chunk_bytes, back.size(), back.data());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(std::memcmp(back.data(), data_.data() + m_.chunk_bytes, back.size()), 0);
}

TEST_F(TierTest, ReadManifestReportsAbsentGarbledAndMisplacedManifests) {
  Manifest m;
  EXPECT_EQ(ReadManifest(dir_, m_.job, {m_.step, m_.rank}, &m).code(), StatusCode::kNotFound);
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, aligned_.get()).ok());
  // Rank 3's manifest put where rank 4's belongs.
  const std::string misplaced = ManifestPath(dir_, m_.job, {m_.step, 4});
  std::filesystem::copy_file(ManifestFile(), misplaced);
  Status st = ReadManifest(dir_, m_.job, {m_.step, 4}, &m);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.message().find("rank 4"), std::string_view::npos) << st.ToString();
  // Bytes that are no manifest: ParseManifest's error, naming the file.
  { std::ofstream(ManifestFile(), std::ios::trunc) << "not a manifest"; }
  m.step = -77;
  st = ReadManifest(dir_, m_.job, {m_.step, m_.rank}, &m);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.message().find(ManifestFile()), std::string_view::npos) << st.ToString();
  EXPECT_EQ(m.step, -77);  // untouched on error
}

TEST_F(TierTest, ListCommittedSeesOnlyCopiesWithManifestAndData) {
  RecordingOps ops;
  for (int64_t step : {1300, 1200}) {
    for (int rank : {5, 3}) {
      Manifest m = m_;
      m.step = step;
      m.rank = rank;
      ASSERT_TRUE(PersistCopy(ops, TierKind::kLocal, dir_, m, aligned_.get(), nullptr, nullptr).ok());
    }
  }
  // A data file whose manifest never came (a worker killed mid-persist), a temp, strays.
  std::filesystem::copy_file(DataFile(), DataPath(dir_, m_.job, {1200, 9}));
  std::filesystem::copy_file(DataFile(), DataPath(dir_, m_.job, {1200, 10}) + ".tmp.77");
  std::filesystem::copy_file(ManifestFile(), StepDir(dir_, m_.job, 1200) + "/rank-3.manifest");
  std::filesystem::create_directories(dir_ + "/job-a/step-12");
  std::filesystem::create_directories(dir_ + "/job-b/step-000000001200");
  EXPECT_EQ(ListCommitted(dir_, m_.job),
            (std::vector<CopyId>{{1200, 3}, {1200, 5}, {1300, 3}, {1300, 5}}));
  EXPECT_TRUE(ListCommitted(dir_, "job-b").empty());
  EXPECT_TRUE(ListCommitted(scratch_.path() + "/nowhere", m_.job).empty());
}

TEST_F(TierTest, RetainKeepsTheNewestCommittedStepsByNumber) {
  RecordingOps ops;
  for (int64_t step : {1, 2, 3, 10}) {
    Manifest m = m_;
    m.step = step;
    ASSERT_TRUE(PersistCopy(ops, TierKind::kRemote, dir_, m, aligned_.get(), nullptr, nullptr).ok());
  }
  // A newer step with only a temp (being written) does not push out a committed one.
  std::filesystem::create_directories(StepDir(dir_, m_.job, 11));
  { std::ofstream(DataPath(dir_, m_.job, {11, 3}) + ".tmp.5") << "x"; }
  RetentionRule rule;
  rule.keep_steps = 2;
  rule.expected_ranks = {3};
  rule.own_ranks = {3};
  ASSERT_TRUE(Retain(dir_, m_.job, rule, nullptr).ok());
  EXPECT_EQ(ListCommitted(dir_, m_.job), (std::vector<CopyId>{{3, 3}, {10, 3}}));
  EXPECT_TRUE(std::filesystem::exists(StepDir(dir_, m_.job, 11)));
  EXPECT_FALSE(std::filesystem::exists(StepDir(dir_, m_.job, 2)));
  rule.keep_steps = 5;
  ASSERT_TRUE(Retain(dir_, m_.job, rule, nullptr).ok());  // fewer than 5: nothing goes
  EXPECT_EQ(ListCommitted(dir_, m_.job).size(), 2u);
  rule.keep_steps = 0;
  EXPECT_EQ(Retain(dir_, m_.job, rule, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ListCommitted(dir_, m_.job).size(), 2u);
}

TEST_F(TierTest, CleanUncommittedRemovesTempsAndOrphansAndKeepsCopies) {
  RecordingOps ops;
  ASSERT_TRUE(Persist(ops, TierKind::kLocal, aligned_.get()).ok());
  const std::string step_dir = StepDir(dir_, m_.job, m_.step);
  std::filesystem::copy_file(DataFile(), DataPath(dir_, m_.job, {m_.step, 4}));  // no manifest
  std::filesystem::copy_file(ManifestFile(), ManifestPath(dir_, m_.job, {m_.step, 6}));  // no data
  { std::ofstream(DataPath(dir_, m_.job, {m_.step, 7}) + ".tmp.1234") << "partial"; }
  { std::ofstream(ManifestPath(dir_, m_.job, {m_.step, 7}) + ".tmp.1234") << "partial"; }
  { std::ofstream(step_dir + "/README") << "not ours"; }
  // A step whose only content was a killed persist: the directory goes too.
  std::filesystem::create_directories(StepDir(dir_, m_.job, 99));
  { std::ofstream(DataPath(dir_, m_.job, {99, 3}) + ".tmp.1") << "partial"; }
  int removed = -1;
  ASSERT_TRUE(CleanUncommitted(dir_, m_.job, &removed).ok());
  EXPECT_EQ(removed, 5);
  EXPECT_FALSE(std::filesystem::exists(StepDir(dir_, m_.job, 99)));
  EXPECT_EQ(FilesUnder(dir_), (std::vector<std::string>{"job-a/step-000000001200/README",
                                                        "job-a/step-000000001200/rank-000003.data",
                                                        "job-a/step-000000001200/rank-000003.manifest"}));
  ExpectReadsBack(m_, data_);
  ASSERT_TRUE(CleanUncommitted(dir_, m_.job, &removed).ok());
  EXPECT_EQ(removed, 0);
  ASSERT_TRUE(CleanUncommitted(scratch_.path() + "/nowhere", m_.job, &removed).ok());
  EXPECT_EQ(removed, 0);
}

TEST_F(TierTest, CleanUncommittedLeavesWhatAnotherWriterMayStillBeWriting) {
  // The remote directory is shared: other nodes' workers, and on a test host other workers of
  // this host, persist into it while this one starts.
  std::filesystem::create_directories(StepDir(dir_, m_.job, m_.step));
  auto touch = [&](int rank, const std::string& suffix) {
    std::string path = DataPath(dir_, m_.job, {m_.step, rank}) + suffix;
    std::ofstream(path) << "x";
    return path;
  };
  const std::string host = ThisHostTag();
  const std::string live_here = touch(1, fmt::format(".tmp.{}.{}", host, ::getpid()));
  // Above any pid_max Linux allows: surely not running.
  const std::string dead_here = touch(2, fmt::format(".tmp.{}.{}", host, 4194305 + 7));
  const std::string recent_elsewhere = touch(3, ".tmp.other-node.42");
  const std::string stale_elsewhere = touch(4, ".tmp.other-node.43");
  const struct timespec an_hour_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, stale_elsewhere.c_str(), an_hour_ago, 0), 0);
  // Between its renames: data in place, manifest still a live temp.
  const std::string committing_data = touch(5, "");
  std::ofstream(ManifestPath(dir_, m_.job, {m_.step, 5}) + fmt::format(".tmp.{}.{}", host, ::getpid()))
      << "x";
  int removed = -1;
  ASSERT_TRUE(CleanUncommitted(dir_, m_.job, &removed).ok());
  EXPECT_EQ(removed, 2);
  EXPECT_TRUE(std::filesystem::exists(live_here));
  EXPECT_FALSE(std::filesystem::exists(dead_here));
  EXPECT_TRUE(std::filesystem::exists(recent_elsewhere));
  EXPECT_FALSE(std::filesystem::exists(stale_elsewhere));
  EXPECT_TRUE(std::filesystem::exists(committing_data));
}

}  // namespace
}  // namespace ft::ckpt

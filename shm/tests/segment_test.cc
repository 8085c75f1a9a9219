#include "shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "common/job_name.h"
#include "shm/tests/test_segment.h"

namespace ft::shm {
namespace {

TEST(SegmentTest, NameCarriesJobRankPidAndSanitizesJob) {
  EXPECT_EQ(SegmentName("llama", 12, 4242), "/ft.llama.r12.p4242");
  EXPECT_EQ(SegmentName("a/b c", 0, 1), "/ft." + JobToken("a/b c") + ".r0.p1");
  EXPECT_EQ(SegmentName("", -1, 9), "/ft." + JobToken("") + ".rx.p9");
  EXPECT_EQ(SegmentName("job", 3, 5).rfind(SegmentPrefix("job"), 0), 0u);
}

// The GPU's bus id is foreign bytes too: read only once published, bounded, and only when it
// looks like a bus id.
TEST(SegmentTest, GpuBusIdIsReadOnlyWhenPublishedAndWellFormed) {
  SegmentHeader h{};
  std::memcpy(h.gpu_bus_id, "0000:3B:00.0", 13);
  EXPECT_EQ(GpuBusIdOf(h), "") << "not published yet";
  h.gpu_bus_id_ready.store(1);
  EXPECT_EQ(GpuBusIdOf(h), "0000:3B:00.0");
  std::memset(h.gpu_bus_id, 'a', sizeof(h.gpu_bus_id));  // no NUL in the field
  EXPECT_EQ(GpuBusIdOf(h), "");
  std::memcpy(h.gpu_bus_id, "0000:3B;rm -rf\0", 16);
  EXPECT_EQ(GpuBusIdOf(h), "");
  h.gpu_bus_id_ready.store(7);  // garbage flag
  std::memcpy(h.gpu_bus_id, "0000:3B:00.0", 13);
  EXPECT_EQ(GpuBusIdOf(h), "");
}

// Segment names follow the one job-name rule (common/job_name.h): jobs whose names differ
// never list each other's segments.
TEST(SegmentTest, JobsWhoseNamesDifferNeverShareAPrefix) {
  const std::string long_name(60, 'j');
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"a.b", "a_b"}, {"a/b", "a_b"}, {long_name + "1", long_name + "2"}, {std::string(48, 'j'), long_name}}) {
    EXPECT_NE(SegmentPrefix(a), SegmentPrefix(b)) << a << " and " << b;
    EXPECT_NE(SegmentName(a, 0, 1).rfind(SegmentPrefix(b), 0), 0u) << a << " and " << b;
  }
  int rank = -1, pid = -1;
  ASSERT_TRUE(ParseSegmentName(SegmentName(long_name + ".x", 7, 99), &rank, &pid));
  EXPECT_EQ(rank, 7);
  EXPECT_EQ(pid, 99);
}

TEST(SegmentTest, CreateWritesHeaderAndOwnerOnlyMode) {
  ScopedSegment seg;
  const SegmentHeader* h = seg.writer().header();
  EXPECT_EQ(h->magic, kMagic);
  EXPECT_EQ(h->layout_version, kLayoutVersion);
  EXPECT_EQ(h->global_rank, 3);
  EXPECT_EQ(h->world_size, 8);
  EXPECT_EQ(h->pid, getpid());
  EXPECT_STREQ(h->node, "node7");
  EXPECT_EQ(h->state.load(), static_cast<uint32_t>(ProcessState::kRunning));
  EXPECT_TRUE(ValidateHeader(h, seg.writer().size()).ok());

  std::string path = "/dev/shm" + seg.name();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), SegmentBytes({}));
}

TEST(SegmentTest, CreateRefusesAnExistingName) {
  ScopedSegment seg;
  std::unique_ptr<Segment> second;
  Identity identity;
  Status status = Segment::Create(seg.name(), identity, getpid(), {}, &second);
  EXPECT_EQ(status.code(), StatusCode::kIoError) << status.ToString();
  EXPECT_EQ(second, nullptr);
}

TEST(SegmentTest, AttachSeesProducerAndCannotWriteHeader) {
  ScopedSegment seg;
  std::unique_ptr<Segment> reader;
  ASSERT_TRUE(Segment::Attach(seg.name(), &reader).ok());
  EXPECT_FALSE(reader->writable());
  EXPECT_EQ(reader->header()->global_rank, 3);
  seg.writer().header()->heartbeat_count.store(77);
  EXPECT_EQ(reader->header()->heartbeat_count.load(), 77u);
  // The control page is the reader's to write.
  reader->control()->reader_pid.store(1234);
  EXPECT_EQ(seg.writer().control()->reader_pid.load(), 1234);
  // The header is mapped read-only: a write faults in a child, not here.
  pid_t child = fork();
  if (child == 0) {
    reader->header()->heartbeat_count.store(1);
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  // A fault kills the child (under a sanitizer its handler exits non-zero instead).
  EXPECT_FALSE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
      << "writing a reader's header mapping must fault";
}

TEST(SegmentTest, AttachMissingIsNotFound) {
  std::unique_ptr<Segment> reader;
  Status status = Segment::Attach("/ft.none.r0.p1", &reader);
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
}

TEST(SegmentTest, ReaderRejectsUnknownVersionWithClearMessage) {
  ScopedSegment seg;
  seg.writer().header()->layout_version = 99;
  std::unique_ptr<Segment> reader;
  Status status = Segment::Attach(seg.name(), &reader);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  EXPECT_NE(status.message().find("version 99"), std::string_view::npos) << status.ToString();
  EXPECT_NE(status.message().find(seg.name()), std::string_view::npos) << status.ToString();
  EXPECT_EQ(reader, nullptr);
}

TEST(SegmentTest, ReaderRejectsTruncatedSegment) {
  ScopedSegment seg;
  int fd = shm_open(seg.name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 8192 + 100), 0);
  close(fd);
  std::unique_ptr<Segment> reader;
  Status status = Segment::Attach(seg.name(), &reader);
  EXPECT_EQ(status.code(), StatusCode::kCorrupt) << status.ToString();
}

TEST(SegmentTest, InitializingSegmentIsNotReady) {
  ScopedSegment seg;
  seg.writer().header()->state.store(static_cast<uint32_t>(ProcessState::kInitializing));
  std::unique_ptr<Segment> reader;
  EXPECT_EQ(Segment::Attach(seg.name(), &reader).code(), StatusCode::kNotReady);
}

TEST(SegmentTest, RemoveUnlinksButMappingStaysValid) {
  ScopedSegment seg;
  std::unique_ptr<Segment> reader;
  ASSERT_TRUE(Segment::Attach(seg.name(), &reader).ok());
  ASSERT_TRUE(reader->Remove().ok());
  EXPECT_EQ(reader->header()->global_rank, 3);
  std::unique_ptr<Segment> again;
  EXPECT_EQ(Segment::Attach(seg.name(), &again).code(), StatusCode::kNotFound);
}

TEST(SegmentTest, BadOptionsAreRejected) {
  std::unique_ptr<Segment> out;
  SegmentOptions options;
  options.ring_capacity = 1000;
  EXPECT_EQ(Segment::Create("/ft.opt.r0.p1", {}, 1, options, &out).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ft::shm

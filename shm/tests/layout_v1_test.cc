// Layout version 1, frozen in shm/layout_v1.h: its header pinned byte by byte, and a segment
// written exactly as a version-1 libft.so wrote it — built here from the frozen header, not by
// today's writer — read by today's reader: identity, ring, records (record format 1), and
// nothing of version 2's fields read out of version 1's reserved bytes.
#include "shm/layout_v1.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "shm/hook_failures.h"
#include "shm/layout.h"
#include "shm/records.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/tests/test_segment.h"

#pragma GCC diagnostic ignored "-Winvalid-offsetof"

namespace ft::shm {
namespace {

TEST(LayoutV1Test, HeaderOffsetsArePinned) {
  using H = v1::SegmentHeader;
  EXPECT_EQ(v1::kLayoutVersion, 1u);
  EXPECT_EQ(sizeof(H), 4096u);
  EXPECT_EQ(offsetof(H, magic), 0u);
  EXPECT_EQ(offsetof(H, layout_version), 8u);
  EXPECT_EQ(offsetof(H, header_bytes), 12u);
  EXPECT_EQ(offsetof(H, segment_bytes), 16u);
  EXPECT_EQ(offsetof(H, control_offset), 24u);
  EXPECT_EQ(offsetof(H, comm_table_offset), 28u);
  EXPECT_EQ(offsetof(H, comm_slot_count), 32u);
  EXPECT_EQ(offsetof(H, comm_slot_bytes), 36u);
  EXPECT_EQ(offsetof(H, ring_offset), 40u);
  EXPECT_EQ(offsetof(H, ring_capacity), 48u);
  EXPECT_EQ(offsetof(H, record_bytes), 52u);
  EXPECT_EQ(offsetof(H, global_rank), 56u);
  EXPECT_EQ(offsetof(H, local_rank), 60u);
  EXPECT_EQ(offsetof(H, world_size), 64u);
  EXPECT_EQ(offsetof(H, pid), 68u);
  EXPECT_EQ(offsetof(H, incarnation), 72u);
  EXPECT_EQ(offsetof(H, created_unix_ns), 80u);
  EXPECT_EQ(offsetof(H, job), 88u);
  EXPECT_EQ(offsetof(H, node), 152u);
  EXPECT_EQ(offsetof(H, host), 216u);
  EXPECT_EQ(offsetof(H, state), 320u);
  EXPECT_EQ(offsetof(H, exit_status), 324u);
  EXPECT_EQ(offsetof(H, heartbeat_ns), 384u);
  EXPECT_EQ(offsetof(H, heartbeat_count), 392u);
  EXPECT_EQ(offsetof(H, last_call_ns), 448u);
  EXPECT_EQ(offsetof(H, call_count), 456u);
  EXPECT_EQ(offsetof(H, blocked_since_ns), 464u);
  EXPECT_EQ(offsetof(H, blocked_count), 472u);
  EXPECT_EQ(offsetof(H, ring_head), 512u);
  EXPECT_EQ(offsetof(H, ring_dropped), 520u);
}

// Every field both versions have sits at the same offset: a reader of version 2 reads a
// version-1 header through its own struct.
TEST(LayoutV1Test, SharedFieldsAgreeWithTheNewestLayout) {
  EXPECT_EQ(offsetof(v1::SegmentHeader, ring_capacity), offsetof(SegmentHeader, ring_capacity));
  EXPECT_EQ(offsetof(v1::SegmentHeader, host), offsetof(SegmentHeader, host));
  EXPECT_EQ(offsetof(v1::SegmentHeader, state), offsetof(SegmentHeader, state));
  EXPECT_EQ(offsetof(v1::SegmentHeader, heartbeat_ns), offsetof(SegmentHeader, heartbeat_ns));
  EXPECT_EQ(offsetof(v1::SegmentHeader, blocked_count), offsetof(SegmentHeader, blocked_count));
  EXPECT_EQ(offsetof(v1::SegmentHeader, ring_head), offsetof(SegmentHeader, ring_head));
  EXPECT_EQ(offsetof(v1::SegmentHeader, ring_dropped), offsetof(SegmentHeader, ring_dropped));
}

// A version-1 segment in /dev/shm, as the version-1 producer laid it out.
class V1Segment {
 public:
  static constexpr uint32_t kSlots = 4;
  static constexpr uint32_t kCapacity = 64;

  V1Segment() : name_(SegmentName(UniqueTestJob(), 5, getpid())) {
    const uint64_t ring_offset = 4096 + 4096 + 4096;  // header, control page, 4 comm slots in one page
    bytes_ = ring_offset + uint64_t{kCapacity} * sizeof(Record);
    int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes_)), 0);
    base_ = static_cast<uint8_t*>(mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    EXPECT_NE(base_, MAP_FAILED);
    v1::SegmentHeader h{};
    h.magic = kMagic;
    h.layout_version = 1;
    h.header_bytes = 4096;
    h.segment_bytes = bytes_;
    h.control_offset = 4096;
    h.comm_table_offset = 8192;
    h.comm_slot_count = kSlots;
    h.comm_slot_bytes = 256;
    h.ring_offset = ring_offset;
    h.ring_capacity = kCapacity;
    h.record_bytes = 64;
    h.global_rank = 5;
    h.local_rank = 1;
    h.world_size = 8;
    h.pid = getpid();
    h.incarnation = 1234567;
    h.created_unix_ns = 1700000000000000000ull;
    std::strncpy(h.job, name_.substr(4, name_.find('.', 4) - 4).c_str(), sizeof(h.job) - 1);
    std::strncpy(h.node, "node7", sizeof(h.node) - 1);
    std::strncpy(h.host, "hostA", sizeof(h.host) - 1);
    h.state = 1;  // running
    // Three records of the version-1 record format.
    for (uint64_t i = 0; i < 3; ++i) {
      Record r{};
      r.type = static_cast<uint16_t>(RecordType::kOpEnter);
      r.comm_id = 0xabc;
      r.seq = 10 + i;
      r.time_ns = 1000 + i;
      std::memcpy(base_ + ring_offset + i * sizeof(Record), &r, sizeof(r));
    }
    h.ring_head = 3;
    std::memcpy(base_, &h, sizeof(h));
  }
  ~V1Segment() {
    munmap(base_, bytes_);
    shm_unlink(name_.c_str());
  }
  const std::string& name() const { return name_; }
  uint8_t* base() { return base_; }

 private:
  std::string name_;
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;
};

TEST(LayoutV1Test, TodaysReaderReadsAVersion1Segment) {
  V1Segment v1;
  // Bytes a version-1 producer kept reserved, here not zero: nothing of version 2 may be read
  // from them (the hook-failure counters begin at 1024 in version 2).
  std::memset(v1.base() + 1024, 0x5a, 512);
  std::unique_ptr<Segment> reader;
  Status attached = Segment::Attach(v1.name(), &reader);
  ASSERT_TRUE(attached.ok()) << attached.ToString();
  const HeaderCopy& info = reader->info();
  EXPECT_EQ(info.layout_version, 1u);
  EXPECT_EQ(info.global_rank, 5);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.node, "node7");
  EXPECT_EQ(info.host, "hostA");
  EXPECT_EQ(info.incarnation, 1234567u);
  EXPECT_EQ(info.ring_capacity, V1Segment::kCapacity);
  EXPECT_EQ(info.record_version, 1u) << "a version-1 producer wrote no record version: format 1";
  EXPECT_TRUE(SnapshotHookFailures(reader->header()).empty());

  RingReader ring(*reader);
  Record out[8];
  size_t got = 0;
  ASSERT_TRUE(ring.Poll(out, 8, &got).ok());
  ASSERT_EQ(got, 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].seq, 10 + i);
    EXPECT_EQ(out[i].comm_id, 0xabcu);
  }
}

TEST(LayoutV1Test, VersionsOutsideTheReadableRangeAreRefusedByName) {
  for (uint32_t version : {0u, kLayoutVersion + 1}) {
    V1Segment v1;
    std::memcpy(v1.base() + offsetof(v1::SegmentHeader, layout_version), &version, sizeof(version));
    std::unique_ptr<Segment> reader;
    Status s = Segment::Attach(v1.name(), &reader);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
    EXPECT_NE(s.message().find("understands 1 to " + std::to_string(kLayoutVersion)), std::string_view::npos)
        << s.ToString();
  }
}

}  // namespace
}  // namespace ft::shm

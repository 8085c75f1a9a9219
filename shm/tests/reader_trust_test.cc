// The reader trusts the header once: what Attach validated is what it uses afterwards, however
// the (writable) header changes; and a segment's name says which rank and pid it claims.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "shm/comm_table.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/tests/test_segment.h"

namespace ft::shm {
namespace {

TEST(ReaderTrustTest, GeometryIsTheValidatedCopyNotTheLiveHeader) {
  SegmentOptions options;
  options.ring_capacity = 64;
  options.comm_slots = 4;
  ScopedSegment seg(options);
  std::unique_ptr<Segment> reader;
  ASSERT_TRUE(Segment::Attach(seg.name(), &reader).ok());
  ControlPage* control = reader->control();
  CommSlot* slots = reader->comm_slots();
  Record* ring = reader->ring();

  // The owner of the file rewrites every size and offset after validation.
  SegmentHeader* h = seg.writer().header();
  h->control_offset = 0x7ffff000;
  h->comm_table_offset = 0x7ffff000;
  h->comm_slot_count = 0xffffffff;
  h->ring_offset = 0x7ffffffff000ull;
  h->ring_capacity = 1u << 31;
  h->pid = 1;
  h->global_rank = 77;

  EXPECT_EQ(reader->control(), control);
  EXPECT_EQ(reader->comm_slots(), slots);
  EXPECT_EQ(reader->ring(), ring);
  EXPECT_EQ(reader->comm_slot_count(), 4u);
  EXPECT_EQ(reader->ring_capacity(), 64u);
  EXPECT_EQ(reader->info().pid, getpid());
  EXPECT_EQ(reader->info().global_rank, 3);
  // Slots past the validated table are not read, whatever the header says now.
  EXPECT_FALSE(SnapshotCommSlot(*reader, 4).has_value());
  EXPECT_FALSE(SnapshotCommSlot(*reader, 1000000).has_value());
  // A ring reader made now still uses the validated capacity: reads stay inside the ring.
  RingReader ring_reader(*reader);
  std::vector<Record> out(128);
  size_t got = 0;
  seg.writer().header()->ring_head.store(1000);
  (void)ring_reader.Poll(out.data(), out.size(), &got);
  EXPECT_LE(got, 64u);
}

TEST(ReaderTrustTest, AttachRecordsOwnerModeAndInode) {
  ScopedSegment seg;
  std::unique_ptr<Segment> reader;
  ASSERT_TRUE(Segment::Attach(seg.name(), &reader).ok());
  struct stat st;
  ASSERT_EQ(stat(("/dev/shm" + seg.name()).c_str(), &st), 0);
  EXPECT_EQ(reader->owner_uid(), st.st_uid);
  EXPECT_EQ(reader->owner_uid(), geteuid());
  EXPECT_EQ(reader->mode(), 0600u);
  EXPECT_EQ(reader->inode(), static_cast<uint64_t>(st.st_ino));
}

TEST(ReaderTrustTest, ParseSegmentName) {
  int rank = -2, pid = 0;
  ASSERT_TRUE(ParseSegmentName(SegmentName("job-1_a", 12, 345), &rank, &pid));
  EXPECT_EQ(rank, 12);
  EXPECT_EQ(pid, 345);
  ASSERT_TRUE(ParseSegmentName("ft.j.rx.p7", &rank, &pid));
  EXPECT_EQ(rank, -1);
  EXPECT_EQ(pid, 7);
  // A job name with dots is sanitized, so the last two parts are always rank and pid.
  ASSERT_TRUE(ParseSegmentName(SegmentName("a.b.c", 1, 2), &rank, &pid));
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(pid, 2);
  for (const char* bad : {"", "/ft.j.r1", "/ft.j.r1.p", "/ft.j.r1.p0", "/ft.j.r.p5", "/ft.j.r1.px",
                          "/ft.j.r-1.p5", "/ft.j.r1.p99999999999", "/ft.j.r01.p5", "/xx.j.r1.p5",
                          "/ft.j.q1.p5", "/ft.r1.p5", "/ft.j.r1.p5 "}) {
    EXPECT_FALSE(ParseSegmentName(bad, &rank, &pid)) << bad;
  }
}

}  // namespace
}  // namespace ft::shm

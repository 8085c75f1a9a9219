#include "shm/comm_table.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "shm/tests/test_segment.h"

namespace ft::shm {
namespace {

TEST(CommTableTest, ClaimIsIdempotentAndBounded) {
  SegmentOptions options;
  options.comm_slots = 2;
  ScopedSegment seg(options);
  CommTableWriter writer(seg.writer());
  auto a = writer.Claim(0xAAAA, 1, 4, 5);
  auto b = writer.Claim(0xBBBB, 0, 2, 5);
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(writer.Claim(0xAAAA, 1, 4, 5), a);
  EXPECT_FALSE(writer.Claim(0xCCCC, 0, 2, 5).has_value());
}

TEST(CommTableTest, ReaderSnapshotShowsEnteredStartedCompleted) {
  ScopedSegment seg;
  std::unique_ptr<Segment> reader;
  ASSERT_TRUE(Segment::Attach(seg.name(), &reader).ok());
  CommTableWriter writer(seg.writer());
  uint32_t slot = *writer.Claim(0x1234, 2, 8, 10);
  EXPECT_FALSE(SnapshotCommSlot(*reader, slot + 1).has_value());
  writer.EnterOp(slot, 7, /*op=*/3, 4096, -1, 1000);
  writer.Started(slot, 6, 900);
  writer.Completed(slot, 6, 950, 50);
  auto p = SnapshotCommSlot(*reader, slot);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->comm_id, 0x1234u);
  EXPECT_EQ(p->comm_rank, 2);
  EXPECT_EQ(p->comm_size, 8);
  EXPECT_EQ(p->global_rank, 10);
  EXPECT_EQ(p->flags, 0u);
  EXPECT_EQ(p->entered_seq, 7u);
  EXPECT_EQ(p->enter_op, 3u);
  EXPECT_EQ(p->entered_bytes, 4096u);
  EXPECT_EQ(p->started_seq, 6u);
  EXPECT_EQ(p->completed_seq, 6u);
  EXPECT_EQ(p->last_duration_ns, 50u);
  EXPECT_EQ(p->pending_seq, 0u) << "none known until the poller says";
  writer.OldestPending(slot, 7, 990);
  p = SnapshotCommSlot(*reader, slot);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->pending_seq, 7u);
  EXPECT_EQ(p->pending_ns, 990u);
  EXPECT_FALSE(SnapshotCommSlot(*reader, 100000).has_value());
}

TEST(CommTableTest, ClaimWritesFlagsBeforePublishing) {
  ScopedSegment seg;
  std::unique_ptr<Segment> reader;
  ASSERT_TRUE(Segment::Attach(seg.name(), &reader).ok());
  CommTableWriter writer(seg.writer());
  uint32_t coll = *writer.Claim(0x10, 0, 2, 0);
  uint32_t p2p = *writer.Claim(0x11, 0, 2, 0, kCommSlotP2P);
  EXPECT_EQ(seg.writer().comm_slots()[p2p].flags, kCommSlotP2P);
  EXPECT_EQ(SnapshotCommSlot(*reader, coll)->flags, 0u);
  EXPECT_EQ(SnapshotCommSlot(*reader, p2p)->flags, kCommSlotP2P);
  // Claiming an existing id again returns its slot and leaves its flags.
  EXPECT_EQ(writer.Claim(0x11, 0, 2, 0), p2p);
  EXPECT_EQ(SnapshotCommSlot(*reader, p2p)->flags, kCommSlotP2P);
}

// Writers keep every field of a group equal to the sequence number; a torn snapshot would
// show two different values. Writers write back to back (the worst case); the reader runs
// for half a second and must still get consistent snapshots in between. A group fits in one
// cache line, so on x86 a broken seqlock rarely tears here: the memory ordering itself is
// checked by the ThreadSanitizer build (`make tsan`), which runs this test.
TEST(CommTableTest, SnapshotsUnderBackToBackWritesAreConsistent) {
  ScopedSegment seg;
  CommTableWriter writer(seg.writer());
  uint32_t slot = *writer.Claim(0x77, 0, 2, 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread app([&] {
    for (uint64_t s = 1; !stop.load(std::memory_order_relaxed); ++s) {
      writer.EnterOp(slot, s, 1, s, static_cast<int64_t>(s), s);
      writes.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::thread poller([&] {
    for (uint64_t s = 1; !stop.load(std::memory_order_relaxed); ++s) {
      writer.Started(slot, s, s);
      writer.Completed(slot, s, s, s);
    }
  });
  int consistent = 0;
  // At least 500 ms of racing, and on until enough snapshots and writes were seen: on a loaded
  // machine the three threads may get little CPU in any fixed time (the limit ends a test
  // that can never get there).
  const auto start = std::chrono::steady_clock::now();
  const auto enough = [&] { return consistent >= 100 && writes.load(std::memory_order_relaxed) >= 1000; };
  while (std::chrono::steady_clock::now() < start + std::chrono::milliseconds(500) ||
         (!enough() && std::chrono::steady_clock::now() < start + std::chrono::seconds(30))) {
    auto p = SnapshotCommSlot(seg.writer(), slot);
    if (!p) continue;
    ++consistent;
    ASSERT_EQ(p->entered_seq, p->entered_ns);
    ASSERT_EQ(p->entered_seq, p->entered_bytes);
    ASSERT_EQ(static_cast<int64_t>(p->entered_seq), p->entered_peer);
    ASSERT_EQ(p->started_seq, p->started_ns);
    ASSERT_EQ(p->completed_seq, p->completed_ns);
    ASSERT_EQ(p->completed_seq, p->last_duration_ns);
  }
  stop = true;
  app.join();
  poller.join();
  EXPECT_GE(consistent, 100);
  EXPECT_GE(writes.load(), 1000u);
}

}  // namespace
}  // namespace ft::shm

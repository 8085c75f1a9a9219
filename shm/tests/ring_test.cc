#include "shm/ring.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "shm/tests/test_segment.h"

namespace ft::shm {
namespace {

Record MakeRecord(uint64_t seq) {
  Record r{};
  r.type = 1;
  r.seq = seq;
  r.a = seq * 3;
  return r;
}

SegmentOptions SmallRing() {
  SegmentOptions options;
  options.ring_capacity = 8;
  return options;
}

TEST(RingTest, RecordsArriveInOrder) {
  ScopedSegment seg;
  std::unique_ptr<Segment> reader_seg;
  ASSERT_TRUE(Segment::Attach(seg.name(), &reader_seg).ok());
  RingWriter writer(seg.writer());
  RingReader reader(*reader_seg);
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(writer.Push(MakeRecord(i)));
  Record out[16];
  size_t got = 0;
  ASSERT_TRUE(reader.Poll(out, 16, &got).ok());
  ASSERT_EQ(got, 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i].seq, i);
    EXPECT_EQ(out[i].a, i * 3);
  }
  ASSERT_TRUE(reader.Poll(out, 16, &got).ok());
  EXPECT_EQ(got, 0u);
}

TEST(RingTest, FullRingDropsNewestAndCountsNeverBlocks) {
  ScopedSegment seg(SmallRing());
  RingWriter writer(seg.writer());
  for (uint64_t i = 0; i < 8; ++i) EXPECT_TRUE(writer.Push(MakeRecord(i)));
  for (uint64_t i = 8; i < 20; ++i) EXPECT_FALSE(writer.Push(MakeRecord(i)));
  EXPECT_EQ(seg.writer().header()->ring_dropped.load(), 12u);
  EXPECT_EQ(seg.writer().header()->ring_head.load(), 8u);

  RingReader reader(seg.writer());
  Record out[8];
  size_t got = 0;
  ASSERT_TRUE(reader.Poll(out, 3, &got).ok());
  ASSERT_EQ(got, 3u);
  EXPECT_EQ(out[0].seq, 0u);
  // Room for three more now.
  EXPECT_TRUE(writer.Push(MakeRecord(100)));
  EXPECT_TRUE(writer.Push(MakeRecord(101)));
  EXPECT_TRUE(writer.Push(MakeRecord(102)));
  EXPECT_FALSE(writer.Push(MakeRecord(103)));
  ASSERT_TRUE(reader.Poll(out, 8, &got).ok());
  ASSERT_EQ(got, 8u);
  EXPECT_EQ(out[0].seq, 3u);
  EXPECT_EQ(out[7].seq, 102u);
  EXPECT_EQ(reader.dropped(), 13u);
}

TEST(RingTest, RestartedReaderResumesAtSharedCursor) {
  ScopedSegment seg;
  RingWriter writer(seg.writer());
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(writer.Push(MakeRecord(i)));
  Record out[16];
  size_t got = 0;
  {
    std::unique_ptr<Segment> first;
    ASSERT_TRUE(Segment::Attach(seg.name(), &first).ok());
    RingReader reader(*first);
    ASSERT_TRUE(reader.Poll(out, 4, &got).ok());
    ASSERT_EQ(got, 4u);
  }
  std::unique_ptr<Segment> second;
  ASSERT_TRUE(Segment::Attach(seg.name(), &second).ok());
  RingReader reader(*second);
  ASSERT_TRUE(reader.Poll(out, 16, &got).ok());
  ASSERT_EQ(got, 6u);
  EXPECT_EQ(out[0].seq, 4u);
}

TEST(RingTest, CorruptCursorIsReportedAndSkipped) {
  ScopedSegment seg(SmallRing());
  RingWriter writer(seg.writer());
  ASSERT_TRUE(writer.Push(MakeRecord(0)));
  seg.writer().control()->ring_tail.store(1000);  // beyond the head: a broken reader
  RingReader reader(seg.writer());
  Record out[8];
  size_t got = 99;
  Status status = reader.Poll(out, 8, &got);
  EXPECT_EQ(status.code(), StatusCode::kCorrupt);
  EXPECT_EQ(got, 0u);
  EXPECT_EQ(seg.writer().control()->ring_tail.load(), 1u);
  // The writer never trusts a tail beyond its head either.
  seg.writer().control()->ring_tail.store(1000);
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(writer.Push(MakeRecord(1 + i)));
  EXPECT_FALSE(writer.Push(MakeRecord(9)));
}

TEST(RingTest, ConcurrentProducerAndConsumerLoseNothingWhenReaderKeepsUp) {
  SegmentOptions options;
  options.ring_capacity = 1024;
  ScopedSegment seg(options);
  std::unique_ptr<Segment> reader_seg;
  ASSERT_TRUE(Segment::Attach(seg.name(), &reader_seg).ok());
  constexpr uint64_t kCount = 200000;
  std::thread producer([&] {
    RingWriter writer(seg.writer());
    for (uint64_t i = 0; i < kCount;) {
      if (writer.Push(MakeRecord(i))) {
        ++i;
      } else {
        // The test's producer retries so every record is checked; libft.so would drop.
        seg.writer().header()->ring_dropped.fetch_sub(1);
        std::this_thread::yield();
      }
    }
  });
  RingReader reader(*reader_seg);
  std::vector<Record> out(256);
  uint64_t expected = 0;
  while (expected < kCount) {
    size_t got = 0;
    ASSERT_TRUE(reader.Poll(out.data(), out.size(), &got).ok());
    for (size_t i = 0; i < got; ++i) {
      ASSERT_EQ(out[i].seq, expected);
      ASSERT_EQ(out[i].a, expected * 3);
      ++expected;
    }
    if (got == 0) std::this_thread::yield();
  }
  producer.join();
  EXPECT_EQ(reader.dropped(), 0u);
}

}  // namespace
}  // namespace ft::shm

namespace ft::shm {
namespace {

TEST(RingPeekTest, PeekShowsNewestWithoutConsuming) {
  SegmentOptions options;
  options.ring_capacity = 16;
  ScopedSegment seg(options);
  RingWriter writer(seg.writer());
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(writer.Push(MakeRecord(i)));
  RingReader reader(seg.writer());
  Record out[16];
  ASSERT_EQ(reader.Peek(out, 3), 3u);
  EXPECT_EQ(out[0].seq, 7u);
  EXPECT_EQ(out[2].seq, 9u);
  EXPECT_EQ(seg.writer().control()->ring_tail.load(), 0u);
  size_t got = 0;
  ASSERT_TRUE(reader.Poll(out, 4, &got).ok());
  ASSERT_EQ(reader.Peek(out, 16), 6u);
  EXPECT_EQ(out[0].seq, 4u);
}

}  // namespace
}  // namespace ft::shm

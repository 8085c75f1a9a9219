#include "shm/mailbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "shm/tests/test_segment.h"

namespace ft::shm {
namespace {

TEST(MailboxTest, PostTakeAckRoundTrip) {
  ScopedSegment seg;
  std::unique_ptr<Segment> worker;
  ASSERT_TRUE(Segment::Attach(seg.name(), &worker).ok());
  const uint8_t payload[] = {1, 2, 3};
  uint64_t seq = 0;
  ASSERT_TRUE(PostCommand(*worker, /*type=*/5, payload, &seq).ok());
  EXPECT_EQ(seq, 1u);
  EXPECT_FALSE(PollAck(*worker, seq).has_value());

  auto command = TakeCommand(seg.writer());
  ASSERT_TRUE(command.has_value());
  EXPECT_EQ(command->seq, 1u);
  EXPECT_EQ(command->type, 5u);
  EXPECT_EQ(command->payload[2], 3);
  AckCommand(seg.writer(), command->seq, 0, "saved 3 buffers");
  EXPECT_FALSE(TakeCommand(seg.writer()).has_value());

  auto ack = PollAck(*worker, seq);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->result, 0);
  EXPECT_EQ(ack->message, "saved 3 buffers");
}

TEST(MailboxTest, CommandsAreTakenOldestFirstAndFullMailboxIsNotReady) {
  ScopedSegment seg;
  uint64_t seq = 0;
  for (uint32_t i = 0; i < kMailboxSlots; ++i) {
    ASSERT_TRUE(PostCommand(seg.writer(), 100 + i, {}, &seq).ok());
  }
  EXPECT_EQ(PostCommand(seg.writer(), 999, {}, &seq).code(), StatusCode::kNotReady);
  for (uint32_t i = 0; i < kMailboxSlots; ++i) {
    auto command = TakeCommand(seg.writer());
    ASSERT_TRUE(command.has_value());
    EXPECT_EQ(command->type, 100 + i);
    AckCommand(seg.writer(), command->seq, 0, "");
  }
  ASSERT_TRUE(PostCommand(seg.writer(), 999, {}, &seq).ok());
  EXPECT_EQ(seq, kMailboxSlots + 1);
}

// A command handed to another thread stays unacknowledged; the process takes the ones after it.
TEST(MailboxTest, TakeCommandAfterSkipsCommandsHandedOver) {
  ScopedSegment seg;
  uint64_t first = 0, second = 0;
  ASSERT_TRUE(PostCommand(seg.writer(), 2, {}, &first).ok());
  ASSERT_TRUE(PostCommand(seg.writer(), 1, {}, &second).ok());
  auto taken = TakeCommandAfter(seg.writer(), 0);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->seq, first);
  // Not acknowledged: TakeCommand keeps returning it, TakeCommandAfter moves on.
  EXPECT_EQ(TakeCommand(seg.writer())->seq, first);
  taken = TakeCommandAfter(seg.writer(), first);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->seq, second);
  EXPECT_EQ(taken->type, 1u);
  AckCommand(seg.writer(), second, 0, "");
  EXPECT_FALSE(TakeCommandAfter(seg.writer(), first).has_value());
  AckCommand(seg.writer(), first, 0, "");
  EXPECT_FALSE(TakeCommand(seg.writer()).has_value());
}

TEST(MailboxTest, OversizedPayloadAndLongMessage) {
  ScopedSegment seg;
  std::vector<uint8_t> big(kMailboxPayloadBytes + 1);
  uint64_t seq = 0;
  EXPECT_EQ(PostCommand(seg.writer(), 1, big, &seq).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(PostCommand(seg.writer(), 1, {}, &seq).ok());
  AckCommand(seg.writer(), seq, 4, std::string(500, 'x'));
  auto ack = PollAck(seg.writer(), seq);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->result, 4);
  EXPECT_EQ(ack->message.size(), kMailboxMessageBytes - 1);
  // Acknowledging a sequence number that is not in the slot changes nothing.
  AckCommand(seg.writer(), seq + kMailboxSlots, 0, "stale");
  EXPECT_FALSE(PollAck(seg.writer(), seq + kMailboxSlots).has_value());
}

// The process waits on the bell through its own mapping, the reader rings it through another
// (as two processes do): the wait ends with the post, not at its timeout.
TEST(MailboxTest, APostRingsTheBellAProcessWaitsOn) {
  using Clock = std::chrono::steady_clock;
  ScopedSegment seg;
  std::unique_ptr<Segment> worker;
  ASSERT_TRUE(Segment::Attach(seg.name(), &worker).ok());
  constexpr auto kTimeout = std::chrono::seconds(60);
  std::atomic<bool> waiting{false};
  Clock::duration waited{};
  std::thread process([&] {
    const uint32_t bell = CommandBell(seg.writer());
    const auto start = Clock::now();
    waiting = true;
    // A wakeup that is not the bell (none expected) would end the wait early as well: loop
    // on the bell's value, as the poller's next round would.
    while (CommandBell(seg.writer()) == bell && Clock::now() - start < kTimeout) {
      WaitForCommand(seg.writer(), bell, std::chrono::nanoseconds(kTimeout).count());
    }
    waited = Clock::now() - start;
  });
  while (!waiting) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // most likely inside the wait
  uint64_t seq = 0;
  ASSERT_TRUE(PostCommand(*worker, 5, {}, &seq).ok());
  process.join();
  EXPECT_LT(waited, kTimeout / 2) << "the post did not end the process's wait";
  EXPECT_TRUE(TakeCommand(seg.writer()).has_value());

  // Without a post the wait lasts its timeout; with a bell already moved it does not wait.
  const auto start = Clock::now();
  WaitForCommand(seg.writer(), CommandBell(seg.writer()), 50'000'000);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(40));
  const auto stale = Clock::now();
  WaitForCommand(seg.writer(), CommandBell(seg.writer()) - 1, std::chrono::nanoseconds(kTimeout).count());
  EXPECT_LT(Clock::now() - stale, kTimeout / 2);
}

}  // namespace
}  // namespace ft::shm

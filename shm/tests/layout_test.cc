// Pins the segment layout: a reader built from another release depends on every offset.
// Changing any of these numbers requires a new kLayoutVersion and docs/shm-format.md.
#include "shm/hook_failures.h"
#include "shm/layout.h"

#include <cstddef>

#include <gtest/gtest.h>

#pragma GCC diagnostic ignored "-Winvalid-offsetof"

namespace ft::shm {
namespace {

TEST(LayoutTest, Constants) {
  EXPECT_EQ(kMagic, 0x3147455354465446ull);
  EXPECT_EQ(kLayoutVersion, 2u);
  EXPECT_EQ(sizeof(SegmentHeader), 4096u);
  EXPECT_EQ(sizeof(ControlPage), 4096u);
  EXPECT_EQ(sizeof(CommSlot), 256u);
  EXPECT_EQ(sizeof(MailboxSlot), 256u);
  EXPECT_EQ(sizeof(Record), 64u);
  EXPECT_EQ(kCommSlotP2P, 1u);
}

TEST(LayoutTest, SegmentHeaderOffsets) {
  EXPECT_EQ(offsetof(SegmentHeader, magic), 0u);
  EXPECT_EQ(offsetof(SegmentHeader, layout_version), 8u);
  EXPECT_EQ(offsetof(SegmentHeader, header_bytes), 12u);
  EXPECT_EQ(offsetof(SegmentHeader, segment_bytes), 16u);
  EXPECT_EQ(offsetof(SegmentHeader, control_offset), 24u);
  EXPECT_EQ(offsetof(SegmentHeader, comm_table_offset), 28u);
  EXPECT_EQ(offsetof(SegmentHeader, comm_slot_count), 32u);
  EXPECT_EQ(offsetof(SegmentHeader, comm_slot_bytes), 36u);
  EXPECT_EQ(offsetof(SegmentHeader, ring_offset), 40u);
  EXPECT_EQ(offsetof(SegmentHeader, ring_capacity), 48u);
  EXPECT_EQ(offsetof(SegmentHeader, record_bytes), 52u);
  EXPECT_EQ(offsetof(SegmentHeader, global_rank), 56u);
  EXPECT_EQ(offsetof(SegmentHeader, local_rank), 60u);
  EXPECT_EQ(offsetof(SegmentHeader, world_size), 64u);
  EXPECT_EQ(offsetof(SegmentHeader, pid), 68u);
  EXPECT_EQ(offsetof(SegmentHeader, incarnation), 72u);
  EXPECT_EQ(offsetof(SegmentHeader, created_unix_ns), 80u);
  EXPECT_EQ(offsetof(SegmentHeader, job), 88u);
  EXPECT_EQ(offsetof(SegmentHeader, node), 152u);
  EXPECT_EQ(offsetof(SegmentHeader, host), 216u);
  EXPECT_EQ(offsetof(SegmentHeader, state), 320u);
  EXPECT_EQ(offsetof(SegmentHeader, exit_status), 324u);
  EXPECT_EQ(offsetof(SegmentHeader, terminate_signal), 328u);
  EXPECT_EQ(offsetof(SegmentHeader, terminate_unix_ns), 336u);
  EXPECT_EQ(offsetof(SegmentHeader, heartbeat_ns), 384u);
  EXPECT_EQ(offsetof(SegmentHeader, heartbeat_count), 392u);
  EXPECT_EQ(offsetof(SegmentHeader, last_call_ns), 448u);
  EXPECT_EQ(offsetof(SegmentHeader, call_count), 456u);
  // Added within layout version 1 (reserved-zero bytes before): 0 reads as "not blocked".
  EXPECT_EQ(offsetof(SegmentHeader, blocked_since_ns), 464u);
  EXPECT_EQ(sizeof(SegmentHeader::blocked_since_ns), 8u);
  EXPECT_EQ(offsetof(SegmentHeader, blocked_count), 472u);
  EXPECT_EQ(sizeof(SegmentHeader::blocked_count), 8u);
  EXPECT_EQ(offsetof(SegmentHeader, ring_head), 512u);
  EXPECT_EQ(offsetof(SegmentHeader, ring_dropped), 520u);
  EXPECT_EQ(offsetof(SegmentHeader, app_step_plus1), 528u);
  EXPECT_EQ(offsetof(SegmentHeader, term_grace_ms), 536u);
  EXPECT_EQ(offsetof(SegmentHeader, restored_step_plus2), 544u);
  EXPECT_EQ(offsetof(SegmentHeader, restore_plan_version), 552u);
  // Added within layout version 2 (reserved-zero bytes before): 0 reads as "not said".
  EXPECT_EQ(offsetof(SegmentHeader, total_steps), 560u);
  EXPECT_EQ(sizeof(SegmentHeader::total_steps), 8u);
  // Version 2: swallowed hook failures by place.
  EXPECT_EQ(kHookFailureSlots, 32u);
  EXPECT_EQ(offsetof(SegmentHeader, hook_failures), 1024u);
  EXPECT_EQ(sizeof(HookFailureSlot), 16u);
  EXPECT_EQ(offsetof(HookFailureSlot, place), 0u);
  EXPECT_EQ(offsetof(HookFailureSlot, count), 8u);
}

// Place ids are a contract with every reader: pinned, never renumbered.
TEST(LayoutTest, HookPlaceIds) {
  EXPECT_EQ(static_cast<uint32_t>(HookPlace::kPoller), 1u);
  EXPECT_EQ(static_cast<uint32_t>(HookPlace::kMissingSymbol), 2u);
  EXPECT_EQ(static_cast<uint32_t>(HookPlace::kResolve), 3u);
  EXPECT_EQ(static_cast<uint32_t>(HookPlace::kNcclPreOp), 4u);
  EXPECT_EQ(static_cast<uint32_t>(HookPlace::kCudaFreePost), 16u);
  EXPECT_EQ(static_cast<uint32_t>(HookPlace::kKernelLaunchPost), 18u);
  EXPECT_EQ(kHookPlaceOverflow, 0xffffffffu);
  EXPECT_STREQ(HookPlaceName(4), "nccl_pre_op");
  EXPECT_EQ(HookPlaceName(999), nullptr);
  EXPECT_EQ(HookPlaceFromName("cuda_graph_pre"), HookPlace::kCudaGraphPre);
}

TEST(LayoutTest, HookFailuresAreCountedByPlaceAndOverflowIntoTheLastSlot) {
  alignas(64) static SegmentHeader header{};
  header.layout_version = kLayoutVersion;  // as the writer leaves it: version 1 had no counters
  CountHookFailure(&header, 4);
  CountHookFailure(&header, 4);
  CountHookFailure(&header, 2);
  auto counts = SnapshotHookFailures(&header);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0].place, 4u);
  EXPECT_EQ(counts[0].count, 2u);
  EXPECT_EQ(counts[1].place, 2u);
  EXPECT_EQ(counts[1].count, 1u);
  for (uint32_t p = 100; p < 100 + kHookFailureSlots; ++p) CountHookFailure(&header, p);
  counts = SnapshotHookFailures(&header);
  ASSERT_EQ(counts.size(), kHookFailureSlots);
  EXPECT_EQ(counts.back().place, kHookPlaceOverflow);
  EXPECT_EQ(counts.back().count, 3u);  // 31 slots: 2 taken before, 29 new, 3 left over
}

TEST(LayoutTest, ControlPageOffsets) {
  EXPECT_EQ(offsetof(ControlPage, ring_tail), 0u);
  EXPECT_EQ(offsetof(ControlPage, reader_pid), 8u);
  EXPECT_EQ(offsetof(ControlPage, next_command_seq), 128u);
  EXPECT_EQ(offsetof(ControlPage, command_bell), 136u);
  EXPECT_EQ(offsetof(ControlPage, mailbox), 256u);
  EXPECT_EQ(offsetof(MailboxSlot, posted_seq), 0u);
  EXPECT_EQ(offsetof(MailboxSlot, acked_seq), 8u);
  EXPECT_EQ(offsetof(MailboxSlot, type), 16u);
  EXPECT_EQ(offsetof(MailboxSlot, ack_result), 20u);
  EXPECT_EQ(offsetof(MailboxSlot, payload), 24u);
  EXPECT_EQ(offsetof(MailboxSlot, ack_message), 152u);
}

TEST(LayoutTest, CommSlotAndRecordOffsets) {
  EXPECT_EQ(offsetof(CommSlot, comm_id), 0u);
  EXPECT_EQ(offsetof(CommSlot, comm_rank), 8u);
  EXPECT_EQ(offsetof(CommSlot, comm_size), 12u);
  EXPECT_EQ(offsetof(CommSlot, global_rank), 16u);
  EXPECT_EQ(offsetof(CommSlot, flags), 20u);
  EXPECT_EQ(offsetof(CommSlot, enter_version), 64u);
  EXPECT_EQ(offsetof(CommSlot, enter_op), 68u);
  EXPECT_EQ(offsetof(CommSlot, entered_seq), 72u);
  EXPECT_EQ(offsetof(CommSlot, entered_ns), 80u);
  EXPECT_EQ(offsetof(CommSlot, entered_bytes), 88u);
  EXPECT_EQ(offsetof(CommSlot, entered_peer), 96u);
  EXPECT_EQ(offsetof(CommSlot, progress_version), 128u);
  EXPECT_EQ(offsetof(CommSlot, started_seq), 136u);
  EXPECT_EQ(offsetof(CommSlot, started_ns), 144u);
  EXPECT_EQ(offsetof(CommSlot, completed_seq), 152u);
  EXPECT_EQ(offsetof(CommSlot, completed_ns), 160u);
  EXPECT_EQ(offsetof(CommSlot, last_duration_ns), 168u);
  EXPECT_EQ(offsetof(CommSlot, pending_seq), 176u);
  EXPECT_EQ(offsetof(CommSlot, pending_ns), 184u);
  EXPECT_EQ(offsetof(Record, type), 0u);
  EXPECT_EQ(offsetof(Record, flags), 2u);
  EXPECT_EQ(offsetof(Record, comm_slot), 4u);
  EXPECT_EQ(offsetof(Record, time_ns), 8u);
  EXPECT_EQ(offsetof(Record, comm_id), 16u);
  EXPECT_EQ(offsetof(Record, seq), 24u);
  EXPECT_EQ(offsetof(Record, a), 32u);
  EXPECT_EQ(offsetof(Record, d), 56u);
}

}  // namespace
}  // namespace ft::shm

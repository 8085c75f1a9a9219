// Pins the words that pack several values (shm/records.h makers and readers) and the save
// acknowledgement's message (shm/save_ack.h): libft.so writes them, readers of another release
// read them.
#include <gtest/gtest.h>

#include <cstdint>

#include "shm/records.h"
#include "shm/save_ack.h"

namespace ft::shm {
namespace {

TEST(RecordWordsTest, OpArgsPackKindDtypeAndPeer) {
  EXPECT_EQ(OpArgsWord(OpKind::kSend, 7, 3), 10u | (7u << 8) | (uint64_t{3} << 32));
  EXPECT_EQ(OpArgsWord(OpKind::kGraphLaunch, 0, kNoPeer), 20u | (uint64_t{0xffffffff} << 32));
  const OpArgs read = ReadOpArgs(OpArgsWord(OpKind::kBroadcast, 9, 5));
  EXPECT_EQ(read.kind, static_cast<uint32_t>(OpKind::kBroadcast));
  EXPECT_EQ(read.dtype, 9);
  EXPECT_EQ(read.peer, 5);
  EXPECT_EQ(ReadOpArgs(OpArgsWord(OpKind::kAllReduce, 1, kNoPeer)).peer, kNoPeer);
  EXPECT_EQ(ReadOpArgs(0x63).kind, 0x63u) << "a newer libft.so's kind is read as its value";
  EXPECT_EQ(OpKindOfRecord(0x63), OpKind::kOther);
}

TEST(RecordWordsTest, CommInitWords) {
  EXPECT_EQ(CommRankWord(3, 8), 3u | (uint64_t{8} << 32));
  EXPECT_EQ(ReadCommRank(CommRankWord(3, 8)).comm_rank, 3);
  EXPECT_EQ(ReadCommRank(CommRankWord(3, 8)).comm_size, 8);
  EXPECT_EQ(CommParentWord(2, -1), (uint64_t{2} << 32) | 0xffffffffu);
  EXPECT_EQ(ReadCommParent(CommParentWord(2, -1)).ordinal, 2u);
  EXPECT_EQ(ReadCommParent(CommParentWord(2, -1)).color, -1);
}

TEST(SaveAckTest, MessageIsTheAgentsAndReadsBack) {
  const SavedCopy c{12, 0xdeadbeef, false, 4096, 3};
  EXPECT_EQ(SaveAckMessage(c), "saved step=12 digest=00000000deadbeef torn=0 bytes=4096 ms=3");
  EXPECT_EQ(ParseSaveAck(SaveAckMessage(c)), c);
  const SavedCopy torn{61, 0x62, true, 1, 0};
  EXPECT_EQ(ParseSaveAck(SaveAckMessage(torn)), torn);
}

TEST(SaveAckTest, OlderAndNewerMessagesAndOthers) {
  // An older agent wrote neither bytes nor ms; a newer one may add words.
  const auto old = ParseSaveAck("saved step=8 digest=0123456789abcdef torn=0");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->step, 8);
  EXPECT_EQ(old->digest, 0x0123456789abcdefu);
  EXPECT_EQ(old->bytes, 0u);
  const auto newer = ParseSaveAck("saved step=9 digest=0000000000000001 torn=1 bytes=2 ms=3 tier=host");
  ASSERT_TRUE(newer.has_value());
  EXPECT_TRUE(newer->torn);
  EXPECT_EQ(newer->ms, 3);
  EXPECT_FALSE(ParseSaveAck("nothing registered").has_value());
  EXPECT_FALSE(ParseSaveAck("no step completed or restored yet: nothing to save").has_value());
  EXPECT_FALSE(ParseSaveAck("saved step=-1 digest=0").has_value());
  EXPECT_FALSE(ParseSaveAck("saved step=x").has_value());
  EXPECT_FALSE(ParseSaveAck("").has_value());
}

}  // namespace
}  // namespace ft::shm

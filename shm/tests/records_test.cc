// Pins the record format (shm/records.h): a reader built from another release depends on every
// value here. Changing the meaning of an existing value requires a new kRecordVersion and
// docs/shm-format.md; new values are appended.
#include "shm/records.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "shm/layout.h"
#include "shm/segment.h"
#include "shm/tests/test_segment.h"

#pragma GCC diagnostic ignored "-Winvalid-offsetof"

namespace ft::shm {
namespace {

TEST(RecordsTest, Version) {
  EXPECT_EQ(kRecordVersion, 2u);
  EXPECT_EQ(offsetof(SegmentHeader, record_version), 280u);
  SegmentHeader h{};
  h.record_version = 0;  // written by a producer that predates the field: format 1
  EXPECT_EQ(RecordVersionOf(h), 1u);
  h.record_version = 2;
  EXPECT_EQ(RecordVersionOf(h), 2u);
}

TEST(RecordsTest, RecordTypes) {
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kCommInit), 1);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kOpEnter), 2);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kOpStart), 3);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kOpEnd), 4);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kApiError), 5);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kCommEnd), 6);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kKernelName), 7);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kAlloc), 8);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kKernelCount), 9);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kKernelSample), 10);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kKernelHandle), 11);
  EXPECT_EQ(static_cast<uint16_t>(RecordType::kStepDone), 12);
}

TEST(RecordsTest, FlagBits) {
  EXPECT_EQ(kFlagP2P, 1);
  EXPECT_EQ(kFlagGrouped, 2);
  EXPECT_EQ(kFlagCaptured, 4);
  EXPECT_EQ(kFlagInProgress, 8);
  EXPECT_EQ(kFlagError, 16);
  EXPECT_EQ(kFlagUntimed, 32);
}

TEST(RecordsTest, OpKindsOriginsLibraries) {
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kNone), 0u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kAllReduce), 1u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kAllGather), 2u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kReduceScatter), 3u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kBroadcast), 4u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kBcast), 5u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kReduce), 6u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kAlltoAll), 7u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kGather), 8u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kScatter), 9u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kSend), 10u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kRecv), 11u);
  EXPECT_EQ(static_cast<uint32_t>(OpKind::kGraphLaunch), 20u);
  EXPECT_EQ(static_cast<uint16_t>(CommOrigin::kInit), 1);
  EXPECT_EQ(static_cast<uint16_t>(CommOrigin::kSplit), 2);
  EXPECT_EQ(static_cast<uint16_t>(CommOrigin::kShrink), 3);
  EXPECT_EQ(static_cast<uint16_t>(CommOrigin::kInitAll), 4);
  EXPECT_EQ(static_cast<uint16_t>(CommOrigin::kUnknown), 5);
  EXPECT_EQ(static_cast<uint64_t>(ApiLibrary::kCudart), 1u);
  EXPECT_EQ(static_cast<uint64_t>(ApiLibrary::kNccl), 2u);
}

// The names Redis values carry (docs/redis-schema.md, CommRow.op): every reader shows these.
TEST(RecordsTest, OpKindNames) {
  EXPECT_EQ(OpKindName(0), "none");
  EXPECT_EQ(OpKindName(1), "allreduce");
  EXPECT_EQ(OpKindName(2), "allgather");
  EXPECT_EQ(OpKindName(3), "reducescatter");
  EXPECT_EQ(OpKindName(4), "broadcast");
  EXPECT_EQ(OpKindName(5), "bcast");
  EXPECT_EQ(OpKindName(6), "reduce");
  EXPECT_EQ(OpKindName(7), "alltoall");
  EXPECT_EQ(OpKindName(8), "gather");
  EXPECT_EQ(OpKindName(9), "scatter");
  EXPECT_EQ(OpKindName(10), "send");
  EXPECT_EQ(OpKindName(11), "recv");
  EXPECT_EQ(OpKindName(20), "graphlaunch");
  EXPECT_EQ(OpKindName(12), "op12");  // a kind a newer libft.so may write
  EXPECT_EQ(OpKindName(99), "op99");
}

// Ids that cross the process boundary: the in-flight table's p2p slot id and kApiError's
// symbol id are recomputed by the reader, so their values are part of the format.
TEST(RecordsTest, StableIds) {
  EXPECT_EQ(MixId(0), 1u);  // 0 marks a free slot
  EXPECT_EQ(kP2PSlotSalt, 0x7032702d736c6f74ull);
  EXPECT_EQ(P2PSlotId(0x1234), 0x8656b607cc1b9649ull);
  // FNV-1a 64 of the name, computed independently (Python) from the bytes of each name.
  EXPECT_EQ(ApiSymbolId("cudaMalloc"), 0x0022810a8c886b42ull);
  EXPECT_EQ(ApiSymbolId("ncclAllReduce"), 0x58dcc2be6219b7eeull);
  EXPECT_EQ(ApiSymbolId("__cudaLaunchKernel"), 0xab89e7fcf54332caull);
  EXPECT_EQ(ApiSymbolId("cudaStreamSynchronize"), 0xbe5865ba1ea0a2e4ull);
}

TEST(RecordsTest, WriterStampsItsRecordVersion) {
  ScopedSegment seg;
  EXPECT_EQ(seg.writer().header()->record_version, kRecordVersion);
}

TEST(RecordsTest, ReaderAcceptsOlderRecordVersions) {
  ScopedSegment seg;
  for (uint32_t v : {0u, 1u, kRecordVersion}) {
    seg.writer().header()->record_version = v;
    std::unique_ptr<Segment> reader;
    Status status = Segment::Attach(seg.name(), &reader);
    EXPECT_TRUE(status.ok()) << v << ": " << status.ToString();
  }
}

TEST(RecordsTest, ReaderRejectsNewerRecordVersionWithClearMessage) {
  ScopedSegment seg;
  seg.writer().header()->record_version = kRecordVersion + 1;
  std::unique_ptr<Segment> reader;
  Status status = Segment::Attach(seg.name(), &reader);
  EXPECT_EQ(status.code(), StatusCode::kUnsupported);
  std::string both = "record format version " + std::to_string(kRecordVersion + 1) +
                     ", this reader understands up to " + std::to_string(kRecordVersion);
  EXPECT_NE(status.message().find(both), std::string_view::npos) << status.ToString();
  EXPECT_EQ(reader, nullptr);
}

}  // namespace
}  // namespace ft::shm

// The offer, connect request and accept reply blobs: round trips and strict rejections.
// Hostile bytes are the fuzz target tests/fuzz/targets/verbs_blobs.cc (CTest fuzz.verbs_blobs).
#include <gtest/gtest.h>

#include <cstring>

#include <infiniband/verbs.h>

#include "rdma/verbs/tests/sample_verbs_blobs.h"
#include "rdma/verbs/verbs_blob.h"

namespace ft::rdma {
namespace {

using namespace ft::rdma::testing;

TEST(verbs_blob, RoundTrips) {
  VerbsOffer offer;
  ASSERT_TRUE(ParseVerbsOffer(EncodeVerbsOffer(SampleOffer()), &offer).ok());
  EXPECT_EQ(offer, SampleOffer());
  VerbsConnectRequest request;
  ASSERT_TRUE(ParseVerbsConnectRequest(EncodeVerbsConnectRequest(SampleRequest()), &request).ok());
  EXPECT_EQ(request, SampleRequest());
  VerbsAcceptReply reply;
  ASSERT_TRUE(ParseVerbsAcceptReply(EncodeVerbsAcceptReply(SampleReply()), &reply).ok());
  EXPECT_EQ(reply, SampleReply());
}

TEST(verbs_blob, LayoutIsPinned) {
  std::string offer = EncodeVerbsOffer(SampleOffer());
  EXPECT_EQ(offer.size(), 8u + 23 + 8 + 4 + 2 * 28);
  EXPECT_EQ(offer.substr(0, 4), "FTVO");
  EXPECT_EQ(static_cast<uint8_t>(offer[4]), kVerbsBlobVersion);
  EXPECT_EQ(static_cast<uint8_t>(offer[8]), 0x34) << "lid, little-endian";
  EXPECT_EQ(EncodeVerbsConnectRequest(SampleRequest()).size(), 8u + 23 + 1 + 4 + 4 * 8);
  EXPECT_EQ(EncodeVerbsConnectRequest(SampleRequest()).substr(0, 4), "FTVC");
  EXPECT_EQ(EncodeVerbsAcceptReply(SampleReply()).size(), 8u + 1 + 4 + 2 * 8);
  EXPECT_EQ(EncodeVerbsAcceptReply(SampleReply()).substr(0, 4), "FTVA");
}

TEST(verbs_blob, RejectsWhatIsNotExactlyRight) {
  VerbsOffer offer;
  offer.region_bytes = 77;  // sentinel: must survive every rejection
  auto rejects = [&](VerbsOffer o, StatusCode code) {
    Status s = ParseVerbsOffer(EncodeVerbsOffer(o), &offer);
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_FALSE(s.message().empty());
    EXPECT_EQ(offer.region_bytes, 77u);
  };
  VerbsOffer gap = SampleOffer();
  gap.segments[1].offset = 4097;
  rejects(gap, StatusCode::kCorrupt);
  VerbsOffer short_cover = SampleOffer();
  short_cover.region_bytes = 20000;
  rejects(short_cover, StatusCode::kCorrupt);
  VerbsOffer beyond = SampleOffer();
  beyond.segments[1].len = 6000;
  rejects(beyond, StatusCode::kCorrupt);
  VerbsOffer empty = SampleOffer();
  empty.segments.clear();
  rejects(empty, StatusCode::kCorrupt);
  VerbsOffer wraps = SampleOffer();
  wraps.segments[1].addr = ~0ull - 10;
  rejects(wraps, StatusCode::kCorrupt);
  VerbsOffer bad_mtu = SampleOffer();
  bad_mtu.address.mtu = 9;
  rejects(bad_mtu, StatusCode::kCorrupt);

  std::string bytes = EncodeVerbsOffer(SampleOffer());
  bytes[4] = 2;  // a future version
  Status s = ParseVerbsOffer(bytes, &offer);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  bytes = EncodeVerbsOffer(SampleOffer()) + "x";
  EXPECT_EQ(ParseVerbsOffer(bytes, &offer).code(), StatusCode::kCorrupt);
  EXPECT_EQ(ParseVerbsOffer(EncodeVerbsConnectRequest(SampleRequest()), &offer).code(), StatusCode::kCorrupt)
      << "another blob's magic";

  VerbsConnectRequest request = SampleRequest();
  request.qps[0].qp_num = 1u << 24;
  VerbsConnectRequest out;
  EXPECT_EQ(ParseVerbsConnectRequest(EncodeVerbsConnectRequest(request), &out).code(), StatusCode::kCorrupt);
  request = SampleRequest();
  request.qps.resize(kMaxVerbsQps + 1);
  EXPECT_EQ(ParseVerbsConnectRequest(EncodeVerbsConnectRequest(request), &out).code(), StatusCode::kCorrupt);
  request = SampleRequest();
  request.rd_atomic = 0;
  EXPECT_EQ(ParseVerbsConnectRequest(EncodeVerbsConnectRequest(request), &out).code(), StatusCode::kCorrupt);
  VerbsAcceptReply reply = SampleReply();
  reply.qps.clear();
  VerbsAcceptReply reply_out;
  EXPECT_EQ(ParseVerbsAcceptReply(EncodeVerbsAcceptReply(reply), &reply_out).code(), StatusCode::kCorrupt);
  EXPECT_EQ(ParseVerbsAcceptReply("", &reply_out).code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace ft::rdma

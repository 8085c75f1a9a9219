// The offer, connect request and accept reply blobs: round trips and strict rejections.
// Hostile bytes are the fuzz target tests/fuzz/targets/verbs_blobs.cc (CTest fuzz.verbs_blobs).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <infiniband/verbs.h>

#include "transfer_engine/verbs/tests/sample_verbs_blobs.h"
#include "transfer_engine/verbs/verbs_blob.h"
#include "transfer_engine/verbs/verbs_blob_v1.h"

namespace ft::rdma {
namespace {

// A packed frame's field by value: gtest takes its arguments by reference, and a reference
// to a misaligned field is undefined behaviour (UBSan: make asan).
template <typename T>
T Val(T v) {
  return v;
}


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

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

// Version 1, frozen (verbs_blob_v1.h): the sample blobs as version 1 wrote them (6536e6b's
// encoder, unchanged since) are read by today's parser field by field, today's encoder still
// writes them, and the frozen structs put every field where those bytes have it. A blob of the
// next version is refused naming both versions, never read as version 1.
TEST(verbs_blob, VersionOneIsFrozen) {
  const std::string offer = Unhex(
      "4654564f010000003412a0a1a2a3a4a5a6a7a8a9aaabacadaeaf0103020105102700000000000002000000"
      "0000000000000000001000000000000000100000007f0000111100000010000000000000101700000000000000"
      "200000007f000022220000");
  const std::string request = Unhex(
      "46545643010000003412a0a1a2a3a4a5a6a7a8a9aaabacadaeaf0103020105100400000001010000efcdab0002"
      "010000010000000301000000000000ffffff00ffffff00");
  const std::string reply = Unhex("4654564101000000080200000001020000050000000202000006000000");
  VerbsOffer offer_out;
  VerbsConnectRequest request_out;
  VerbsAcceptReply reply_out;
  ASSERT_TRUE(ParseVerbsOffer(offer, &offer_out).ok());
  ASSERT_TRUE(ParseVerbsConnectRequest(request, &request_out).ok());
  ASSERT_TRUE(ParseVerbsAcceptReply(reply, &reply_out).ok());
  EXPECT_EQ(offer_out, SampleOffer());
  EXPECT_EQ(request_out, SampleRequest());
  EXPECT_EQ(reply_out, SampleReply());
  EXPECT_EQ(EncodeVerbsOffer(SampleOffer()), offer);
  EXPECT_EQ(EncodeVerbsConnectRequest(SampleRequest()), request);
  EXPECT_EQ(EncodeVerbsAcceptReply(SampleReply()), reply);

  namespace v1 = verbs_blob::v1;
  v1::OfferFixed o;
  std::memcpy(&o, offer.data(), sizeof(o));
  EXPECT_EQ(std::string(o.header.magic, 4), "FTVO");
  EXPECT_EQ(Val(o.header.version), 1u);
  EXPECT_EQ(Val(o.address.lid), 0x1234u);
  EXPECT_EQ(Val(o.address.mtu), IBV_MTU_4096);
  EXPECT_EQ(Val(o.region_bytes), 10000u);
  EXPECT_EQ(Val(o.segment_count), 2u);
  EXPECT_EQ(offer.size(), sizeof(o) + 2 * sizeof(v1::Segment));
  v1::Segment second;
  std::memcpy(&second, offer.data() + sizeof(o) + sizeof(v1::Segment), sizeof(second));
  EXPECT_EQ(Val(second.offset), 4096u);
  EXPECT_EQ(Val(second.addr), 0x7f0000002000u);
  EXPECT_EQ(Val(second.rkey), 0x2222u);
  v1::ConnectRequestFixed c;
  std::memcpy(&c, request.data(), sizeof(c));
  EXPECT_EQ(Val(c.rd_atomic), 16u);
  EXPECT_EQ(Val(c.qp_count), 4u);
  v1::Qp first;
  std::memcpy(&first, request.data() + sizeof(c), sizeof(first));
  EXPECT_EQ(Val(first.qp_num), 0x101u);
  EXPECT_EQ(Val(first.psn), 0xabcdefu);
  v1::AcceptReplyFixed a;
  std::memcpy(&a, reply.data(), sizeof(a));
  EXPECT_EQ(Val(a.max_dest_rd_atomic), 8u);
  EXPECT_EQ(Val(a.qp_count), 2u);
  EXPECT_EQ(reply.size(), sizeof(a) + 2 * sizeof(v1::Qp));

  std::string next = offer;
  next[4] = 2;
  offer_out.region_bytes = 77;
  Status s = ParseVerbsOffer(next, &offer_out);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_EQ(s.message(), "verbs offer version 2, this build speaks 1: upgrade one side");
  EXPECT_EQ(offer_out.region_bytes, 77u);
}

}  // namespace
}  // namespace ft::rdma

// The offer, connect request and accept reply blobs: round trips, strict rejections, and a
// deterministic mutation loop (hostile bytes give Ok or an explained error, never a crash or
// an output set on failure). The ASan build runs this too.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <infiniband/verbs.h>

#include "rdma/verbs_blob.h"

namespace ft::rdma {
namespace {

VerbsPortAddress SampleAddress() {
  VerbsPortAddress a;
  a.lid = 0x1234;
  for (int i = 0; i < 16; ++i) a.gid[i] = static_cast<uint8_t>(0xa0 + i);
  a.use_gid = 1;
  a.gid_index = 3;
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  a.port = 1;
  a.mtu = IBV_MTU_4096;
  return a;
}

VerbsOffer SampleOffer() {
  VerbsOffer o;
  o.region_bytes = 10000;
  o.address = SampleAddress();
  o.segments = {{0, 4096, 0x7f0000001000, 0x1111}, {4096, 5904, 0x7f0000002000, 0x2222}};
  return o;
}

VerbsConnectRequest SampleRequest() {
  VerbsConnectRequest r;
  r.address = SampleAddress();
  r.rd_atomic = 16;
  r.qps = {{0x101, 0xabcdef}, {0x102, 1}, {0x103, 0}, {0xffffff, 0xffffff}};
  return r;
}

VerbsAcceptReply SampleReply() {
  VerbsAcceptReply r;
  r.max_dest_rd_atomic = 8;
  r.qps = {{0x201, 5}, {0x202, 6}};
  return r;
}

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

void Mutate(std::mt19937_64& rng, std::string* bytes) {
  int mutations = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < mutations && !bytes->empty(); ++k) {
    switch (rng() % 5) {
      case 0:
        (*bytes)[rng() % bytes->size()] = static_cast<char>(rng());
        break;
      case 1:  // a boundary value in a word: counts, lengths, offsets
        if (bytes->size() >= 8) {
          size_t at = rng() % (bytes->size() - 7);
          uint64_t v = (rng() % 2) ? ~0ull : rng() % 8;
          std::memcpy(bytes->data() + at, &v, (rng() % 2) ? 4 : 8);
        }
        break;
      case 2:
        bytes->resize(rng() % bytes->size());
        break;
      case 3:
        bytes->append(1 + rng() % 40, static_cast<char>(rng()));
        break;
      default:  // a bit flip
        (*bytes)[rng() % bytes->size()] ^= static_cast<char>(1 << (rng() % 8));
        break;
    }
  }
}

template <typename T>
void FuzzOne(const std::string& valid, Status (*parse)(std::string_view, T*), std::string (*encode)(const T&),
             uint64_t seed, int* parsed, int* rejected) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = valid;
    Mutate(rng, &bytes);
    T out;
    T sentinel = out;
    Status s = parse(bytes, &out);
    if (s.ok()) {
      ++*parsed;
      T again;
      ASSERT_TRUE(parse(encode(out), &again).ok());  // what parses re-encodes to the same value
      ASSERT_EQ(again, out);
    } else {
      ++*rejected;
      ASSERT_FALSE(s.message().empty());
      ASSERT_TRUE(s.code() == StatusCode::kCorrupt || s.code() == StatusCode::kUnsupported) << s.ToString();
      ASSERT_EQ(out, sentinel) << "output set on failure";
    }
  }
}

TEST(verbs_blob_fuzz, MutatedBlobsNeverCrashAndAlwaysExplain) {
  int parsed = 0, rejected = 0;
  FuzzOne<VerbsOffer>(EncodeVerbsOffer(SampleOffer()), &ParseVerbsOffer, &EncodeVerbsOffer, 1, &parsed, &rejected);
  FuzzOne<VerbsConnectRequest>(EncodeVerbsConnectRequest(SampleRequest()), &ParseVerbsConnectRequest,
                               &EncodeVerbsConnectRequest, 2, &parsed, &rejected);
  FuzzOne<VerbsAcceptReply>(EncodeVerbsAcceptReply(SampleReply()), &ParseVerbsAcceptReply, &EncodeVerbsAcceptReply, 3,
                            &parsed, &rejected);
  EXPECT_GT(rejected, 30000);
  EXPECT_GT(parsed, 100) << "mutations of values (a key, a qp number) still parse";
}

TEST(verbs_blob_fuzz, RandomBytesAreRejected) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 5000; ++i) {
    std::string bytes(rng() % 200, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    VerbsOffer offer;
    VerbsConnectRequest request;
    VerbsAcceptReply reply;
    EXPECT_FALSE(ParseVerbsOffer(bytes, &offer).ok());
    EXPECT_FALSE(ParseVerbsConnectRequest(bytes, &request).ok());
    EXPECT_FALSE(ParseVerbsAcceptReply(bytes, &reply).ok());
  }
}

}  // namespace
}  // namespace ft::rdma

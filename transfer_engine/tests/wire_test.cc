// The wire protocol's byte layout, pinned (docs/transfer-protocol.md is the same table): a
// change here is a protocol change and needs a new version. Also the decoders' refusals and the
// authentication proofs.
#include <gtest/gtest.h>

#include <cstring>

#include "transfer_engine/auth.h"
#include "transfer_engine/wire.h"

namespace ft::rdma::wire {
namespace {

std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string_view Payload(const std::string& frame) {
  return std::string_view(frame).substr(kHeaderBytes);
}

FrameHeader Header(const std::string& frame) {
  FrameHeader h;
  Status s = ParseHeader(reinterpret_cast<const uint8_t*>(frame.data()), &h);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return h;
}

Nonce Counting(uint8_t first) {
  Nonce n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(first + i);
  return n;
}

TEST(WireTest, HeaderLayoutIsPinned) {
  std::string frame = EncodeClose();
  // magic "FTRX", version 2, type 13, length 0: all little-endian.
  EXPECT_EQ(Hex(frame), "4654525802000d0000000000");
  EXPECT_EQ(Hex(EncodeAuthRefused()), "465452580200050000000000");
}

TEST(WireTest, EveryMessageLayoutIsPinned) {
  EXPECT_EQ(Hex(EncodeOpen({kOpenWantsFastPath, "arena/7/3"})),
            "46545258020006000f000000" "01000000" "0900" "6172656e612f372f33");
  EXPECT_EQ(Hex(EncodeRead({2, 0x0102030405060708ull, 0x00400000, 0x1122334455667788ull})),
            "4654525802000a0018000000" "02000000" "0807060504030201" "00004000"
            "8877665544332211");
  OpenReply reply{5, 0x10000000000ull, "man", "of"};
  EXPECT_EQ(Hex(EncodeOpenReply(reply)), "465452580200070019000000" "05000000" "0000000000010000"
                                         "03000000" "6d616e" "02000000" "6f66");
  EXPECT_EQ(Hex(EncodeFastConnect({1, "rq"})), "46545258020008000a000000" "01000000" "02000000" "7271");
  EXPECT_EQ(Hex(EncodeFastConnectReply({"rp"})), "465452580200090006000000" "02000000" "7270");
  EXPECT_EQ(Hex(EncodeError({ErrorCode::kNotReady, 9, "gone"})),
            "4654525802000c0010000000" "0400" "0900000000000000" "0400" "676f6e65");
  Hello hello{1, Counting(0)};
  std::string h = EncodeHello(hello);
  EXPECT_EQ(Hex(h.substr(0, 16)), "465452580200010024000000" "01000000");
  EXPECT_EQ(h.size(), kHeaderBytes + 4 + kNonceBytes);
  EXPECT_EQ(EncodeChallenge({Counting(1)}).size(), kHeaderBytes + kNonceBytes);
  EXPECT_EQ(Hex(EncodeResponse({}).substr(0, 12)), "465452580200030020000000");
  EXPECT_EQ(Hex(EncodeAuthOk({}).substr(0, 12)), "465452580200040020000000");
  uint8_t prefix[kHeaderBytes + kDataHeaderBytes];
  EncodeDataPrefix({7, 4096, 3}, prefix);
  EXPECT_EQ(Hex(std::string_view(reinterpret_cast<char*>(prefix), sizeof(prefix))),
            "4654525802000b0017000000" "0700000000000000" "0010000000000000" "03000000");
}

TEST(WireTest, MessagesRoundTrip) {
  Hello hello{1, Counting(3)};
  Hello hello2;
  std::string f = EncodeHello(hello);
  ASSERT_EQ(Header(f).type, MessageType::kHello);
  ASSERT_TRUE(DecodeHello(Payload(f), &hello2).ok());
  EXPECT_EQ(hello2, hello);

  OpenReply reply{3, 1ull << 40, std::string(1000, 'm'), std::string(10, 'o')}, reply2;
  f = EncodeOpenReply(reply);
  ASSERT_TRUE(DecodeOpenReply(Payload(f), &reply2).ok());
  EXPECT_EQ(reply2, reply);

  Read read{1, 99, 4096, 12}, read2;
  f = EncodeRead(read);
  ASSERT_TRUE(DecodeRead(Payload(f), &read2).ok());
  EXPECT_EQ(read2, read);

  Error error{ErrorCode::kOutOfRange, 4, "past the end"}, error2;
  f = EncodeError(error);
  ASSERT_TRUE(DecodeError(Payload(f), &error2).ok());
  EXPECT_EQ(error2, error);

  uint8_t prefix[kHeaderBytes + kDataHeaderBytes];
  EncodeDataPrefix({5, 64, 100}, prefix);
  FrameHeader h;
  ASSERT_TRUE(ParseHeader(prefix, &h).ok());
  DataHeader data;
  ASSERT_TRUE(DecodeDataHeader(std::string_view(reinterpret_cast<char*>(prefix) + kHeaderBytes,
                                                kDataHeaderBytes),
                               h.length, &data)
                  .ok());
  EXPECT_EQ(data, (DataHeader{5, 64, 100}));
}

TEST(WireTest, UnknownMagicVersionOrTypeIsRefusedByName) {
  std::string f = EncodeClose();
  FrameHeader h;
  std::string bad = f;
  bad[0] = 'X';
  Status s = ParseHeader(reinterpret_cast<const uint8_t*>(bad.data()), &h);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("magic"), std::string_view::npos);

  bad = f;
  bad[4] = 1;  // version 1 spoke after the handshake in the clear: refused, never downgraded to
  s = ParseHeader(reinterpret_cast<const uint8_t*>(bad.data()), &h);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("version 1 is not supported"), std::string_view::npos) << s.ToString();

  bad = f;
  bad[6] = 14;
  s = ParseHeader(reinterpret_cast<const uint8_t*>(bad.data()), &h);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("unknown transfer message type 14"), std::string_view::npos);
}

TEST(WireTest, EveryLengthIsBounded) {
  FrameHeader h;
  uint8_t header[kHeaderBytes];
  // A frame longer than its type allows is refused before any payload is read.
  // Sealed data: header, its tag, the bytes, their tag.
  const uint64_t data_max = kDataHeaderBytes + kTagBytes + kMaxReadBytes + kTagBytes;
  EncodeHeader(MessageType::kData, static_cast<uint32_t>(data_max + 1), header);
  EXPECT_EQ(ParseHeader(header, &h).code(), StatusCode::kCorrupt);
  EncodeHeader(MessageType::kData, static_cast<uint32_t>(data_max), header);
  EXPECT_TRUE(ParseHeader(header, &h).ok());
  EncodeHeader(MessageType::kHello, 37, header);
  EXPECT_EQ(ParseHeader(header, &h).code(), StatusCode::kCorrupt);
  EncodeHeader(MessageType::kClose, kTagBytes + 1, header);  // a sealed close is its tag alone
  EXPECT_EQ(ParseHeader(header, &h).code(), StatusCode::kCorrupt);
  EncodeHeader(MessageType::kAuthRefused, 1, header);
  EXPECT_EQ(ParseHeader(header, &h).code(), StatusCode::kCorrupt);

  Open open;
  EXPECT_TRUE(DecodeOpen(Payload(EncodeOpen({0, std::string(256, 'n')})), &open).ok());
  Status s = DecodeOpen(Payload(EncodeOpen({0, std::string(257, 'n')})), &open);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("region name of 257 bytes exceeds the limit of 256"), std::string_view::npos)
      << s.ToString();
  EXPECT_EQ(DecodeOpen(Payload(EncodeOpen({0, ""})), &open).code(), StatusCode::kCorrupt);
  EXPECT_TRUE(DecodeOpen(Payload(EncodeOpen({kOpenWantsFastPath | kOpenEncryptData, "a"})), &open).ok());
  EXPECT_EQ(DecodeOpen(Payload(EncodeOpen({4, "a"})), &open).code(), StatusCode::kCorrupt);

  Read read;
  EXPECT_EQ(DecodeRead(Payload(EncodeRead({0, 0, 0, 1})), &read).code(), StatusCode::kCorrupt);
  EXPECT_TRUE(DecodeRead(Payload(EncodeRead({0, 0, static_cast<uint32_t>(kMaxReadBytes), 1})), &read).ok());
  s = DecodeRead(Payload(EncodeRead({0, 0, static_cast<uint32_t>(kMaxReadBytes) + 1, 1})), &read);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);

  // meta above kMaxMetaBytes: the declared length alone is refused, nothing allocated.
  std::string payload(4 + 8, '\0');
  uint32_t huge = static_cast<uint32_t>(kMaxMetaBytes + 1);
  payload.append(reinterpret_cast<const char*>(&huge), 4);
  OpenReply reply;
  s = DecodeOpenReply(payload, &reply);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("meta of"), std::string_view::npos) << s.ToString();

  // A data header whose length disagrees with its frame.
  uint8_t prefix[kHeaderBytes + kDataHeaderBytes];
  EncodeDataPrefix({1, 0, 100}, prefix);
  DataHeader data;
  EXPECT_EQ(DecodeDataHeader(std::string_view(reinterpret_cast<char*>(prefix) + kHeaderBytes,
                                               kDataHeaderBytes),
                             kDataHeaderBytes + 99, &data)
                .code(),
            StatusCode::kCorrupt);
}

TEST(WireTest, TruncatedOrTrailingPayloadsAreRefusedAndLeaveTheOutputAlone) {
  std::string f = EncodeOpenReply({1, 2, "meta", "offer"});
  std::string_view payload = Payload(f);
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    OpenReply out{77, 77, "keep", "keep"};
    EXPECT_EQ(DecodeOpenReply(payload.substr(0, cut), &out).code(), StatusCode::kCorrupt) << cut;
    EXPECT_EQ(out, (OpenReply{77, 77, "keep", "keep"}));
  }
  std::string longer(payload);
  longer += 'x';
  OpenReply out;
  Status s = DecodeOpenReply(longer, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("trailing"), std::string_view::npos);
  EXPECT_EQ(DecodeEmpty("x", MessageType::kClose).code(), StatusCode::kCorrupt);
  Error error;
  EXPECT_EQ(DecodeError(Payload(EncodeError({static_cast<ErrorCode>(99), 0, ""})), &error).code(),
            StatusCode::kCorrupt);
}

TEST(WireTest, ErrorCodesBecomeTheMatchingStatus) {
  EXPECT_EQ(StatusFromError(ErrorCode::kNotFound, "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(StatusFromError(ErrorCode::kNotReady, "x").code(), StatusCode::kNotReady);
  EXPECT_EQ(StatusFromError(ErrorCode::kUnsupportedVersion, "x").code(), StatusCode::kUnsupported);
  EXPECT_EQ(StatusFromError(ErrorCode::kOutOfRange, "x").code(), StatusCode::kInvalidArgument);
}

TEST(AuthTest, ProofsArePinnedHmacSha256OverBothNoncesAndTheRole) {
  Nonce server = Counting(0), client = Counting(100);
  Mac c = auth::ComputeMac("job-secret", auth::Role::kClient, server, client);
  Mac s = auth::ComputeMac("job-secret", auth::Role::kServer, server, client);
  // Python: hmac.new(b"job-secret", b"ft-transfer/1 client" + sn + cn, sha256)
  EXPECT_EQ(Hex(std::string_view(reinterpret_cast<char*>(c.data()), c.size())),
            "d80578121beb2e4ed2511af02427718c5b4c65b695474c93e9e2e26995d164b9");
  EXPECT_EQ(Hex(std::string_view(reinterpret_cast<char*>(s.data()), s.size())),
            "33319458fa579fbe00defdf6614439c5f6e71e90cb5283b3719a5b785585021a");
  EXPECT_TRUE(auth::VerifyMac("job-secret", auth::Role::kClient, server, client, c));
  // A reflected proof, another secret or another nonce does not verify.
  EXPECT_FALSE(auth::VerifyMac("job-secret", auth::Role::kServer, server, client, c));
  EXPECT_FALSE(auth::VerifyMac("job-secret2", auth::Role::kClient, server, client, c));
  EXPECT_FALSE(auth::VerifyMac("job-secret", auth::Role::kClient, Counting(1), client, c));
}

TEST(AuthTest, NoncesAreFreshEachTime) {
  Nonce a, b;
  ASSERT_TRUE(auth::RandomNonce(&a).ok());
  ASSERT_TRUE(auth::RandomNonce(&b).ok());
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ft::rdma::wire

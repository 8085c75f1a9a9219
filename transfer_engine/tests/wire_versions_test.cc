// Every shipped version of the transfer protocol, frozen in its own header
// (transfer_engine/wire_v1.h, wire_v2.h) and pinned here; and what each side does with a peer of an
// older version (docs/transfer-protocol.md, "Versions"). The version-1 bytes below are what a
// version-1 build (3c17558's rdma/wire.cc) wrote, not made by today's encoders.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <thread>

#include "transfer_engine/tests/raw_socket.h"
#include "transfer_engine/transfer.h"
#include "transfer_engine/wire.h"
#include "transfer_engine/wire_v1.h"
#include "transfer_engine/wire_v2.h"

namespace ft::rdma::wire {
namespace {

// A packed frame's field by value: gtest takes its arguments by reference, and a reference
// to a misaligned field is undefined behaviour (UBSan: make asan).
template <typename T>
T Val(T v) {
  return v;
}


std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

template <typename T>
T As(std::string_view bytes, size_t at = 0) {  // the frozen structs describe little-endian bytes
  T value;
  EXPECT_GE(bytes.size(), at + sizeof(T));
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  return value;
}

// Frames as version 1 wrote them: a hello with the nonce 00..1f, open of "arena/7/3" asking
// for the fast path, a read, close, auth-refused, a data prefix (tag 5, offset 64, 100 bytes),
// and a version-1 server's answer to a version-2 hello.
const std::string kV1Hello = Unhex(
    "46545258010001002400000001000000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
const std::string kV1Open = Unhex("46545258010006000f0000000100000009006172656e612f372f33");
const std::string kV1Read = Unhex("4654525801000a0018000000020000000807060504030201000040008877665544332211");
const std::string kV1Close = Unhex("4654525801000d0000000000");
const std::string kV1AuthRefused = Unhex("465452580100050000000000");
const std::string kV1DataPrefix = Unhex("4654525801000b00780000000500000000000000400000000000000064000000");
const char kV1ServerRefusalText[] = "transfer protocol version 2 is not supported (this side speaks version 1)";
const std::string kV1ServerRefusal = Unhex(
    "4654525801000c00550000000200000000000000000049007472616e736665722070726f746f636f6c2076657273"
    "696f6e2032206973206e6f7420737570706f72746564202874686973207369646520737065616b732076657273696f"
    "6e203129");

void ExpectHeader(std::string_view frame, uint16_t version, uint16_t type, uint32_t length) {
  auto h = As<v1::FrameHeader>(frame);
  EXPECT_EQ(h.magic, v1::kMagic);
  EXPECT_EQ(Val(h.version), version);
  EXPECT_EQ(Val(h.type), type);
  EXPECT_EQ(Val(h.length), length);
  EXPECT_EQ(frame.size(), sizeof(v1::FrameHeader) + length);
}

TEST(WireVersionsTest, VersionOneIsPinned) {
  EXPECT_EQ(v1::kVersion, 1u);
  EXPECT_EQ(sizeof(v1::FrameHeader), 12u);
  EXPECT_EQ(offsetof(v1::FrameHeader, version), 4u);
  EXPECT_EQ(offsetof(v1::FrameHeader, type), 6u);
  EXPECT_EQ(offsetof(v1::FrameHeader, length), 8u);
  EXPECT_EQ(offsetof(v1::Read, tag), 16u);
  EXPECT_EQ(offsetof(v1::ErrorFixed, text_bytes), 10u);

  ExpectHeader(kV1Hello, 1, v1::kHello, sizeof(v1::Hello));
  auto hello = As<v1::Hello>(kV1Hello, 12);
  EXPECT_EQ(Val(hello.max_version), 1u);
  for (size_t i = 0; i < v1::kNonceBytes; ++i) EXPECT_EQ(hello.client_nonce[i], i);

  ExpectHeader(kV1Open, 1, v1::kOpen, sizeof(v1::OpenFixed) + 9);
  auto open = As<v1::OpenFixed>(kV1Open, 12);
  EXPECT_EQ(Val(open.flags), v1::kOpenWantsFastPath);
  EXPECT_EQ(Val(open.name_bytes), 9u);
  EXPECT_EQ(kV1Open.substr(12 + sizeof(v1::OpenFixed)), "arena/7/3");

  ExpectHeader(kV1Read, 1, v1::kRead, sizeof(v1::Read));
  auto read = As<v1::Read>(kV1Read, 12);
  EXPECT_EQ(Val(read.handle), 2u);
  EXPECT_EQ(Val(read.offset), 0x0102030405060708ull);
  EXPECT_EQ(Val(read.len), 0x00400000u);
  EXPECT_EQ(Val(read.tag), 0x1122334455667788ull);

  ExpectHeader(kV1Close, 1, v1::kClose, 0);
  ExpectHeader(kV1AuthRefused, 1, v1::kAuthRefused, 0);
  auto data = As<v1::DataHeader>(kV1DataPrefix, 12);
  EXPECT_EQ(Val(As<v1::FrameHeader>(kV1DataPrefix).length), sizeof(v1::DataHeader) + 100);
  EXPECT_EQ(Val(data.tag), 5u);
  EXPECT_EQ(Val(data.offset), 64u);
  EXPECT_EQ(Val(data.len), 100u);

  const std::string_view text = kV1ServerRefusalText;
  ExpectHeader(kV1ServerRefusal, 1, v1::kError, sizeof(v1::ErrorFixed) + text.size());
  auto error = As<v1::ErrorFixed>(kV1ServerRefusal, 12);
  EXPECT_EQ(Val(error.code), v1::kErrorUnsupportedVersion);
  EXPECT_EQ(Val(error.tag), 0u);
  EXPECT_EQ(Val(error.text_bytes), text.size());
  EXPECT_EQ(kV1ServerRefusal.substr(12 + sizeof(v1::ErrorFixed)), text);

  // Version 1's limits, as its header parser enforced them (types 1..13).
  const uint64_t limits[] = {36, 32, 32, 32, 0, 262, 16842772, 65544, 65540, 24, 67108884, 1036, 0};
  for (uint16_t type = 1; type <= v1::kMaxMessageType; ++type) {
    EXPECT_EQ(v1::MaxPayload(type), limits[type - 1]) << "type " << type;
  }
  EXPECT_STREQ(v1::kClientProofContext, "ft-transfer/1 client");
  EXPECT_STREQ(v1::kServerProofContext, "ft-transfer/1 server");
}

// Today's codec writes version 2 as wire_v2.h describes it: version 1's plaintext payloads under
// a header that says 2, and version 2's limits (tags included).
TEST(WireVersionsTest, VersionTwoIsWhatTheCodecWrites) {
  EXPECT_EQ(kProtocolVersion, v2::kVersion);
  auto as_v2 = [](std::string frame) {
    frame[4] = static_cast<char>(v2::kVersion);
    return frame;
  };
  Nonce nonce;
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i);
  std::string hello_v2 = as_v2(kV1Hello);
  hello_v2[12] = static_cast<char>(v2::kVersion);  // max_version
  EXPECT_EQ(EncodeHello({v2::kVersion, nonce}), hello_v2);
  EXPECT_EQ(EncodeOpen({kOpenWantsFastPath, "arena/7/3"}), as_v2(kV1Open));
  EXPECT_EQ(EncodeRead({2, 0x0102030405060708ull, 0x00400000, 0x1122334455667788ull}), as_v2(kV1Read));
  EXPECT_EQ(EncodeClose(), as_v2(kV1Close));
  EXPECT_EQ(EncodeAuthRefused(), as_v2(kV1AuthRefused));
  std::string prefix(kHeaderBytes + kDataHeaderBytes, '\0');
  EncodeDataPrefix({5, 64, 100}, reinterpret_cast<uint8_t*>(prefix.data()));
  EXPECT_EQ(prefix, as_v2(kV1DataPrefix));

  const uint64_t limits[] = {36, 32, 32, 32, 0, 278, 16842788, 65560, 65556, 40, 67108916, 1052, 16};
  for (uint16_t type = 1; type <= kMaxMessageType; ++type) {
    EXPECT_EQ(v2::MaxPayload(type), limits[type - 1]) << "type " << type;
    EXPECT_EQ(MaxPayload(static_cast<MessageType>(type)), v2::MaxPayload(type)) << "type " << type;
  }
  EXPECT_EQ(v2::kOpenEncryptData, 2u);
  EXPECT_EQ(kMaxPreAuthPayload, 1036u);
  EXPECT_STREQ(v2::kClientKeyContext, "ft-transfer/2 key client");
  EXPECT_STREQ(v2::kServerKeyContext, "ft-transfer/2 key server");
}

constexpr char kSecret[] = "5e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e";

class WireVersionsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {  // no regions: nothing gets past the hello here
    ServerOptions options;
    options.listen_address = "127.0.0.1";
    options.secret = kSecret;
    server_ = std::make_unique<Server>(options);
    ASSERT_TRUE(server_->Start().ok());
  }
  // What the server answers to `hello`, up to its close.
  std::string Answer(const std::string& hello) {
    testing::RawSocket raw(server_->port());
    EXPECT_TRUE(raw.connected());
    EXPECT_TRUE(raw.Send(hello));
    bool eof = false;
    std::string answer = raw.ReceiveAll(&eof);
    EXPECT_TRUE(eof) << "the connection stays open";
    return answer;
  }
  std::unique_ptr<Server> server_;
};

// A version-1 client (the bytes it sent) is not served — version 1 is never spoken — but told
// why in version 1's own framing, which it decodes: an unsupported-version error naming both
// versions, and nothing else (no challenge, no region).
TEST_F(WireVersionsServerTest, AVersionOneClientIsRefusedInItsOwnVersion) {
  std::string answer = Answer(kV1Hello);
  ASSERT_GE(answer.size(), sizeof(v1::FrameHeader) + sizeof(v1::ErrorFixed)) << answer;
  auto header = As<v1::FrameHeader>(answer);
  auto error = As<v1::ErrorFixed>(answer, sizeof(v1::FrameHeader));
  ExpectHeader(answer, v1::kVersion, v1::kError, sizeof(v1::ErrorFixed) + error.text_bytes);
  ASSERT_LE(Val(header.length), v1::MaxPayload(v1::kError)) << "a version-1 client refuses a longer frame";
  EXPECT_EQ(Val(error.code), v1::kErrorUnsupportedVersion);
  EXPECT_EQ(Val(error.tag), 0u);
  std::string text = answer.substr(sizeof(v1::FrameHeader) + sizeof(v1::ErrorFixed));
  EXPECT_EQ(text,
            "transfer protocol version 1 is not supported (this side speaks version 2; version 1 is "
            "no longer spoken: upgrade the side on it)");
  EXPECT_EQ(server_->stats().auth_refused, 1u);
  EXPECT_EQ(server_->stats().bytes_sent, 0u);
}

// A client of a version newer than this server's is told in this server's version (the newer
// side reads the older ones' refusals), naming both and which side to upgrade.
TEST_F(WireVersionsServerTest, ANewerClientIsRefusedInThisVersionNamingBoth) {
  std::string hello = EncodeHello({3, {}});
  hello[4] = 3;
  std::string answer = Answer(hello);
  FrameHeader header;
  ASSERT_GE(answer.size(), kHeaderBytes);
  ASSERT_TRUE(ParseHeader(reinterpret_cast<const uint8_t*>(answer.data()), &header).ok());
  ASSERT_EQ(Val(header.type), MessageType::kError);
  Error error;
  ASSERT_TRUE(DecodeError(std::string_view(answer).substr(kHeaderBytes), &error).ok());
  EXPECT_EQ(Val(error.code), ErrorCode::kUnsupportedVersion);
  EXPECT_EQ(Val(error.text), "transfer protocol version 3 is not supported (this side speaks version 2: upgrade this side)");
  EXPECT_EQ(server_->stats().auth_refused, 1u);
}

// Today's client against a version-1 server (its refusal as it wrote it): Unsupported, naming
// both versions, nothing asked for.
TEST(WireVersionsClientTest, AVersionOneServerIsRefusedByTheClientNamingBoth) {
  testing::RawListener listener;
  ASSERT_TRUE(listener.listening());
  std::string hello, after;
  std::thread old_server([&] {
    std::unique_ptr<testing::RawSocket> conn = listener.Accept();
    hello = conn->Receive(kHeaderBytes + sizeof(v2::Hello));
    conn->Send(kV1ServerRefusal);
    shutdown(conn->fd(), SHUT_WR);
    bool eof = false;
    after = conn->ReceiveAll(&eof);
  });
  PullOptions options;
  options.secret = kSecret;
  RegionInfo info;
  Status s = Stat(options, {"old", "127.0.0.1", listener.port()}, "arena/7/3", &info);
  old_server.join();
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find("transfer protocol version 1 is not supported (this side speaks version 2; "
                             "version 1 is no longer spoken: upgrade the side on it)"),
            std::string_view::npos)
      << s.ToString();
  ASSERT_EQ(hello.size(), kHeaderBytes + sizeof(v2::Hello));
  EXPECT_EQ(As<v2::FrameHeader>(hello).version, v2::kVersion);
  EXPECT_EQ(As<v2::Hello>(hello, kHeaderBytes).max_version, v2::kVersion);
  EXPECT_EQ(after.find("arena"), std::string::npos) << "the client named a region to it";
}

}  // namespace
}  // namespace ft::rdma::wire

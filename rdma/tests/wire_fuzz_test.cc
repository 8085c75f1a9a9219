// Hostile transfer frames: mutated valid frames of every type, truncations and random bytes
// must decode to Ok or an error with a message — never a crash, a read out of bounds or an
// allocation beyond the frame's bound (the ASan build runs this too). Whatever decodes
// re-encodes to the same bytes. Deterministic seeds, so a failure reproduces.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "rdma/wire.h"

namespace ft::rdma::wire {
namespace {

template <typename M>
Status DecodeAs(Status (*decode)(std::string_view, M*), std::string (*encode)(const M&),
                std::string_view payload, std::string* again) {
  M m;
  FT_RETURN_IF_ERROR(decode(payload, &m));
  *again = encode(m);
  return Status::Ok();
}

// Decodes one whole frame the way a peer does (header, then the payload by type) and returns
// the frame re-encoded from what was decoded.
Status DecodeFrame(const std::string& frame, std::string* again) {
  if (frame.size() < kHeaderBytes) return Status::Corrupt("short frame");
  FrameHeader h;
  FT_RETURN_IF_ERROR(ParseHeader(reinterpret_cast<const uint8_t*>(frame.data()), &h));
  if (frame.size() - kHeaderBytes != h.length) return Status::Corrupt("length mismatch");
  std::string_view p = std::string_view(frame).substr(kHeaderBytes);
  switch (h.type) {
    case MessageType::kHello: return DecodeAs(DecodeHello, EncodeHello, p, again);
    case MessageType::kChallenge: return DecodeAs(DecodeChallenge, EncodeChallenge, p, again);
    case MessageType::kResponse: return DecodeAs(DecodeResponse, EncodeResponse, p, again);
    case MessageType::kAuthOk: return DecodeAs(DecodeAuthOk, EncodeAuthOk, p, again);
    case MessageType::kOpen: return DecodeAs(DecodeOpen, EncodeOpen, p, again);
    case MessageType::kOpenReply: return DecodeAs(DecodeOpenReply, EncodeOpenReply, p, again);
    case MessageType::kFastConnect: return DecodeAs(DecodeFastConnect, EncodeFastConnect, p, again);
    case MessageType::kFastConnectReply:
      return DecodeAs(DecodeFastConnectReply, EncodeFastConnectReply, p, again);
    case MessageType::kRead: return DecodeAs(DecodeRead, EncodeRead, p, again);
    case MessageType::kError: return DecodeAs(DecodeError, EncodeError, p, again);
    case MessageType::kAuthRefused:
      FT_RETURN_IF_ERROR(DecodeEmpty(p, h.type));
      *again = EncodeAuthRefused();
      return Status::Ok();
    case MessageType::kClose:
      FT_RETURN_IF_ERROR(DecodeEmpty(p, h.type));
      *again = EncodeClose();
      return Status::Ok();
    case MessageType::kData: {
      if (p.size() < kDataHeaderBytes) return Status::Corrupt("short data frame");
      DataHeader d;
      FT_RETURN_IF_ERROR(DecodeDataHeader(p.substr(0, kDataHeaderBytes), h.length, &d));
      std::string prefix(kHeaderBytes + kDataHeaderBytes, '\0');
      EncodeDataPrefix(d, reinterpret_cast<uint8_t*>(prefix.data()));
      *again = prefix + std::string(p.substr(kDataHeaderBytes));
      return Status::Ok();
    }
  }
  return Status::Internal("unreachable");
}

std::vector<std::string> ValidFrames() {
  Nonce nonce;
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i * 7);
  Mac mac;
  for (size_t i = 0; i < mac.size(); ++i) mac[i] = static_cast<uint8_t>(i * 3);
  std::string data(kHeaderBytes + kDataHeaderBytes, '\0');
  EncodeDataPrefix({3, 4096, 40}, reinterpret_cast<uint8_t*>(data.data()));
  data += std::string(40, 'd');
  return {EncodeHello({1, nonce}),
          EncodeChallenge({nonce}),
          EncodeResponse({mac}),
          EncodeAuthOk({mac}),
          EncodeAuthRefused(),
          EncodeOpen({0, "arena/12/3"}),
          EncodeOpenReply({2, 1ull << 33, std::string(300, 'm'), "offer-blob"}),
          EncodeFastConnect({2, "request-blob"}),
          EncodeFastConnectReply({"reply-blob"}),
          EncodeRead({2, 8192, 4096, 17}),
          EncodeError({ErrorCode::kNotReady, 17, "changed"}),
          EncodeClose(),
          data};
}

void CheckDecode(const std::string& bytes, int* parsed, int* rejected) {
  std::string again;
  Status s = DecodeFrame(bytes, &again);
  if (!s.ok()) {
    EXPECT_FALSE(s.message().empty());
    EXPECT_TRUE(s.code() == StatusCode::kCorrupt || s.code() == StatusCode::kUnsupported)
        << s.ToString();
    ++*rejected;
    return;
  }
  EXPECT_EQ(again, bytes) << "a decoded frame must re-encode to its own bytes";
  ++*parsed;
}

TEST(WireFuzzTest, MutatedFramesNeverCrashAndAlwaysExplain) {
  std::vector<std::string> valid = ValidFrames();
  std::mt19937_64 rng(20261125);
  int parsed = 0, rejected = 0;
  for (int iteration = 0; iteration < 40000; ++iteration) {
    std::string bytes = valid[rng() % valid.size()];
    int mutations = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < mutations && !bytes.empty(); ++k) {
      switch (rng() % 5) {
        case 0:  // a random byte, mostly in the header and the first length fields
          bytes[(rng() % 2 ? rng() % 24 : rng()) % bytes.size()] = static_cast<char>(rng());
          break;
        case 1:  // a boundary value in a 32-bit word (lengths, handles)
          if (bytes.size() >= 4) {
            size_t at = rng() % (bytes.size() - 3);
            uint32_t v = (rng() % 2) ? 0xffffffffu : static_cast<uint32_t>(rng() % 300);
            std::memcpy(&bytes[at], &v, 4);
          }
          break;
        case 2:  // truncate
          bytes.resize(rng() % bytes.size());
          break;
        case 3:  // append
          bytes.append(1 + rng() % 40, static_cast<char>(rng()));
          break;
        default:  // keep the header's length honest, so the payload decoders are reached
          if (bytes.size() >= kHeaderBytes) {
            uint32_t len = static_cast<uint32_t>(bytes.size() - kHeaderBytes);
            std::memcpy(&bytes[8], &len, 4);
          }
          break;
      }
    }
    CheckDecode(bytes, &parsed, &rejected);
  }
  EXPECT_GT(rejected, 20000);
  EXPECT_GT(parsed, 100);  // mutations that kept a frame valid (e.g. a byte inside a blob)
}

TEST(WireFuzzTest, RandomBytesAreRejected) {
  std::mt19937_64 rng(11);
  int parsed = 0, rejected = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::string bytes(rng() % 80, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    // Half of them carry a valid magic and version, so type and length checks are reached.
    if (bytes.size() >= kHeaderBytes && rng() % 2) {
      uint8_t header[kHeaderBytes];
      EncodeHeader(static_cast<MessageType>(rng() % 16),
                   static_cast<uint32_t>(bytes.size() - kHeaderBytes), header);
      std::memcpy(bytes.data(), header, 8);
    }
    CheckDecode(bytes, &parsed, &rejected);
  }
  EXPECT_GT(rejected, 19000);
}

TEST(WireFuzzTest, EveryValidFrameDecodes) {
  int parsed = 0, rejected = 0;
  for (const std::string& frame : ValidFrames()) CheckDecode(frame, &parsed, &rejected);
  EXPECT_EQ(rejected, 0);
}

}  // namespace
}  // namespace ft::rdma::wire

// Transfer-protocol frames as a server or a puller reads them off a socket
// (transfer_engine/wire.h): a frame of any type, mutated, truncated or random, decodes to Ok or an
// error with a message and a code a caller handles, never a read past the frame; whatever decodes
// re-encodes to the same bytes. Half the mutations keep the header's length honest so the payload
// decoders run.
#include <cstring>

#include "tests/fuzz/fuzz_target.h"
#include "transfer_engine/wire.h"

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

void SetLength(std::string* bytes) {
  if (bytes->size() < kHeaderBytes) return;
  uint32_t len = static_cast<uint32_t>(bytes->size() - kHeaderBytes);
  std::memcpy(bytes->data() + 8, &len, 4);
}

}  // namespace
}  // namespace ft::rdma::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ft;
  const std::string frame(reinterpret_cast<const char*>(data), size);
  std::string again;
  Status s = rdma::wire::DecodeFrame(frame, &again);
  if (!s.ok()) {
    fuzz::Refused(s);
    return 0;
  }
  FT_FUZZ_CHECK(again == frame, "a decoded frame must re-encode to its own bytes");
  fuzz::Accepted();
  return 0;
}

ft::fuzz::TargetInfo FuzzTargetInfo() {
  using namespace ft::rdma::wire;
  ft::fuzz::TargetInfo info;
  info.name = "transfer_wire";
  info.seeds = ValidFrames();
  info.mutate.hot_prefix = 24;  // the header and the first length fields
  info.mutate.max_edits = 3;
  info.mutate.fixup = SetLength;
  info.mutate.fixup_per_8 = 4;
  info.random_max_bytes = 80;
  uint8_t header[kHeaderBytes];
  EncodeHeader(MessageType::kOpen, 0, header);
  info.random_start = std::string(reinterpret_cast<const char*>(header), 8);  // magic and version
  info.mutations = 40000;
  info.min_accepted = 100;  // mutations that keep a frame valid (a byte inside a blob)
  info.min_rejected = 20000;
  return info;
}

// Transfer protocol version 2 (8128db1, today's): version 1's frames and handshake, then a
// sealed session — every frame after auth-ok is one AES-256-GCM message under its sender's
// session key (transfer_engine/channel.h), its tag after the payload. Frozen: when version 3 ships,
// this file stays as it is and wire_v3.h describes the new one (docs/transfer-protocol.md,
// "Versions"); transfer_engine/wire.cc encodes exactly this, and
// transfer_engine/tests/wire_versions_test.cc pins it.
#ifndef FT_TRANSFER_ENGINE_WIRE_V2_H_
#define FT_TRANSFER_ENGINE_WIRE_V2_H_

#include <cstddef>
#include <cstdint>

#include "transfer_engine/wire_v1.h"

namespace ft::rdma::wire::v2 {

inline constexpr uint16_t kVersion = 2;
inline constexpr size_t kTagBytes = 16;  // AES-256-GCM tag of a sealed message
// Session keys: HMAC-SHA256(secret, context || server nonce || client nonce), one per sender.
// The handshake's proofs are version 1's (v1::kClientProofContext, v1::kServerProofContext).
inline constexpr char kClientKeyContext[] = "ft-transfer/2 key client";
inline constexpr char kServerKeyContext[] = "ft-transfer/2 key server";
inline constexpr uint32_t kOpenWantsFastPath = v1::kOpenWantsFastPath;
inline constexpr uint32_t kOpenEncryptData = 2;  // this handle's data bytes encrypted too

// The plaintext payloads are version 1's, byte for byte (the structs of transfer_engine/wire_v1.h).
using v1::ErrorFixed, v1::FrameHeader, v1::Hello, v1::Read, v1::DataHeader, v1::OpenFixed,
    v1::OpenReplyFixed, v1::FastConnectFixed, v1::FastConnectReplyFixed;

// Before the handshake ends a peer sends only hello, challenge, response, auth-ok,
// auth-refused or an unsupported-version error, in the clear: no frame needs more than this.
inline constexpr uint64_t kMaxPreAuthPayload = sizeof(ErrorFixed) + v1::kMaxErrorTextBytes;
static_assert(kMaxPreAuthPayload == 1036);

// The largest payload of each type as sent (0 for an unknown type): the frames after the
// handshake carry their tag, a data frame two when its bytes are encrypted.
constexpr uint64_t MaxPayload(uint16_t type) {
  switch (type) {
    case v1::kHello:
    case v1::kChallenge:
    case v1::kResponse:
    case v1::kAuthOk:
    case v1::kAuthRefused: return v1::MaxPayload(type);
    case v1::kOpen:
    case v1::kOpenReply:
    case v1::kFastConnect:
    case v1::kFastConnectReply:
    case v1::kRead:
    case v1::kError:
    case v1::kClose: return v1::MaxPayload(type) + kTagBytes;
    case v1::kData: return sizeof(DataHeader) + kTagBytes + v1::kMaxReadBytes + kTagBytes;
    default: return 0;
  }
}
static_assert(MaxPayload(v1::kClose) == 16 && MaxPayload(v1::kRead) == 40 &&
              MaxPayload(v1::kOpen) == 278 && MaxPayload(v1::kError) == 1052 &&
              MaxPayload(v1::kData) == 20 + 16 + (64ull << 20) + 16 && MaxPayload(14) == 0);

}  // namespace ft::rdma::wire::v2

#endif  // FT_TRANSFER_ENGINE_WIRE_V2_H_

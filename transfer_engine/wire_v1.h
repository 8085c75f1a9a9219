// Transfer protocol version 1, frozen as the transfer engine spoke it until version 2 sealed
// the session after the handshake (8128db1). Never edit this file: a new version freezes what
// it replaces in a wire_v<N>.h of its own (docs/transfer-protocol.md, "Versions").
//
// Nothing speaks version 1 any more: it sent every frame after the handshake in the clear and
// unauthenticated, so serving it would give anyone on the path a way to strip version 2's seal
// (answer a hello as version 1). What a reader of today must still know of it: how a version-1
// peer frames a refusal, so each side tells the other, by number, that it speaks another
// version (transfer_engine/tests/wire_versions_test.cc speaks it with bytes a version-1 build
// wrote).
//
// The structs describe byte positions, little-endian, no padding: they are a description, and
// the codec (transfer_engine/wire.cc) reads and writes bytes explicitly.
#ifndef FT_TRANSFER_ENGINE_WIRE_V1_H_
#define FT_TRANSFER_ENGINE_WIRE_V1_H_

#include <cstddef>
#include <cstdint>

namespace ft::rdma::wire::v1 {

inline constexpr uint16_t kVersion = 1;
inline constexpr uint32_t kMagic = 0x58525446;  // "FTRX"
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;  // HMAC-SHA256
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr uint64_t kMaxMetaBytes = 16ull << 20;
inline constexpr uint64_t kMaxReadBytes = 64ull << 20;
inline constexpr size_t kMaxOfferBytes = 64 << 10;
inline constexpr size_t kMaxErrorTextBytes = 1024;
// The handshake's proofs: HMAC-SHA256(secret, context || server nonce || client nonce).
inline constexpr char kClientProofContext[] = "ft-transfer/1 client";
inline constexpr char kServerProofContext[] = "ft-transfer/1 server";

// Message types and error codes (the same numbers in version 2).
inline constexpr uint16_t kHello = 1, kChallenge = 2, kResponse = 3, kAuthOk = 4, kAuthRefused = 5,
                          kOpen = 6, kOpenReply = 7, kFastConnect = 8, kFastConnectReply = 9,
                          kRead = 10, kData = 11, kError = 12, kClose = 13;
inline constexpr uint16_t kMaxMessageType = 13;
inline constexpr uint16_t kErrorProtocol = 1, kErrorUnsupportedVersion = 2, kErrorNotFound = 3,
                          kErrorNotReady = 4, kErrorBadHandle = 5, kErrorOutOfRange = 6,
                          kErrorNoFastPath = 7, kErrorTooManyOpen = 8, kErrorInternal = 9;
inline constexpr uint32_t kOpenWantsFastPath = 1;  // the only open flag of version 1

#pragma pack(push, 1)
struct FrameHeader {
  uint32_t magic;    // 0
  uint16_t version;  // 4: 1
  uint16_t type;     // 6
  uint32_t length;   // 8: payload bytes after the header
};
struct Hello {
  uint32_t max_version;                // 0
  uint8_t client_nonce[kNonceBytes];   // 4
};
struct Challenge {
  uint8_t server_nonce[kNonceBytes];
};
struct Proof {  // response and auth-ok
  uint8_t mac[kMacBytes];
};
struct OpenFixed {  // then name_bytes of name
  uint32_t flags;       // 0
  uint16_t name_bytes;  // 4
};
struct OpenReplyFixed {  // then meta, u32 offer_bytes, offer
  uint32_t handle;      // 0
  uint64_t size;        // 4
  uint32_t meta_bytes;  // 12
};
struct FastConnectFixed {  // then request
  uint32_t handle;         // 0
  uint32_t request_bytes;  // 4
};
struct FastConnectReplyFixed {  // then reply
  uint32_t reply_bytes;
};
struct Read {
  uint32_t handle;  // 0
  uint64_t offset;  // 4
  uint32_t len;     // 12
  uint64_t tag;     // 16
};
struct DataHeader {  // then len bytes
  uint64_t tag;     // 0
  uint64_t offset;  // 8
  uint32_t len;     // 16
};
struct ErrorFixed {  // then text_bytes of text
  uint16_t code;        // 0
  uint64_t tag;         // 2
  uint16_t text_bytes;  // 10
};
#pragma pack(pop)

static_assert(sizeof(FrameHeader) == 12);
static_assert(offsetof(FrameHeader, version) == 4 && offsetof(FrameHeader, type) == 6 &&
              offsetof(FrameHeader, length) == 8);
static_assert(sizeof(Hello) == 36 && offsetof(Hello, client_nonce) == 4);
static_assert(sizeof(Challenge) == 32 && sizeof(Proof) == 32);
static_assert(sizeof(OpenFixed) == 6 && offsetof(OpenFixed, name_bytes) == 4);
static_assert(sizeof(OpenReplyFixed) == 16 && offsetof(OpenReplyFixed, size) == 4 &&
              offsetof(OpenReplyFixed, meta_bytes) == 12);
static_assert(sizeof(FastConnectFixed) == 8 && sizeof(FastConnectReplyFixed) == 4);
static_assert(sizeof(Read) == 24 && offsetof(Read, offset) == 4 && offsetof(Read, len) == 12 &&
              offsetof(Read, tag) == 16);
static_assert(sizeof(DataHeader) == 20 && offsetof(DataHeader, offset) == 8 &&
              offsetof(DataHeader, len) == 16);
static_assert(sizeof(ErrorFixed) == 12 && offsetof(ErrorFixed, tag) == 2 &&
              offsetof(ErrorFixed, text_bytes) == 10);

// The largest payload of each type (0 for an unknown type); a header announcing more was refused.
constexpr uint64_t MaxPayload(uint16_t type) {
  switch (type) {
    case kHello: return sizeof(Hello);
    case kChallenge: return sizeof(Challenge);
    case kResponse:
    case kAuthOk: return sizeof(Proof);
    case kAuthRefused:
    case kClose: return 0;
    case kOpen: return sizeof(OpenFixed) + kMaxNameBytes;
    case kOpenReply: return sizeof(OpenReplyFixed) + kMaxMetaBytes + 4 + kMaxOfferBytes;
    case kFastConnect: return sizeof(FastConnectFixed) + kMaxOfferBytes;
    case kFastConnectReply: return sizeof(FastConnectReplyFixed) + kMaxOfferBytes;
    case kRead: return sizeof(Read);
    case kData: return sizeof(DataHeader) + kMaxReadBytes;
    case kError: return sizeof(ErrorFixed) + kMaxErrorTextBytes;
    default: return 0;
  }
}

}  // namespace ft::rdma::wire::v1

#endif  // FT_TRANSFER_ENGINE_WIRE_V1_H_

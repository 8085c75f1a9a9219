// The transfer engine's wire protocol (docs/transfer-protocol.md): framed little-endian messages
// on a TCP connection. Every frame is a 12-byte header (magic, version, type, payload length)
// followed by the payload. This file owns the byte layout: encoders build whole frames, the
// decoders take a payload that a FrameHeader admitted and refuse anything malformed with a
// Status that says what was wrong. Pure functions, no sockets: any thread.
//
// Bytes from the network are hostile: every length is bounded before anything is allocated
// (a frame's payload by MaxPayload(type), a region name by kMaxNameBytes, meta by kMaxMetaBytes,
// a read by kMaxReadBytes), and an unknown magic, version or type is refused by name.
#ifndef FT_TRANSFER_ENGINE_WIRE_H_
#define FT_TRANSFER_ENGINE_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "transfer_engine/transfer.h"
#include "transfer_engine/wire_v1.h"
#include "transfer_engine/wire_v2.h"

namespace ft::rdma::wire {

// The layout is version 2's, frozen in transfer_engine/wire_v2.h (version 1's in
// transfer_engine/wire_v1.h); these are its names for the codec.
inline constexpr uint32_t kMagic = v1::kMagic;  // "FTRX" in little-endian bytes
inline constexpr size_t kHeaderBytes = sizeof(v2::FrameHeader);
inline constexpr size_t kNonceBytes = v1::kNonceBytes;
inline constexpr size_t kMacBytes = v1::kMacBytes;  // HMAC-SHA256
inline constexpr size_t kMaxNameBytes = v1::kMaxNameBytes;
inline constexpr uint64_t kMaxReadBytes = v1::kMaxReadBytes;
inline constexpr size_t kMaxOfferBytes = v1::kMaxOfferBytes;  // fast-path offer / connect blobs
inline constexpr size_t kMaxErrorTextBytes = v1::kMaxErrorTextBytes;
inline constexpr size_t kDataHeaderBytes = sizeof(v2::DataHeader);  // tag, offset, len before the data bytes
inline constexpr size_t kTagBytes = v2::kTagBytes;  // AES-256-GCM tag of a sealed message
// Before the handshake ends a peer sends only hello, challenge, response, auth-ok, auth-refused
// or an unsupported-version error: no frame needs more than this.
inline constexpr size_t kMaxPreAuthPayload = v2::kMaxPreAuthPayload;
static_assert(kProtocolVersion == v2::kVersion, "a new version freezes its layout in wire_v<N>.h");
static_assert(kMaxMetaBytes == v1::kMaxMetaBytes);

// The versions that shipped before kProtocolVersion, each frozen in transfer_engine/wire_v<N>.h.
// None is spoken (docs/transfer-protocol.md, "Versions"): version 1's session was not sealed, and
// answering a hello in it would let anyone on the path strip the seal. A peer of an older
// version is refused in its own framing, naming both versions, so both sides say why.
inline constexpr uint32_t kOldestShippedVersion = v1::kVersion;

// The numbers are version 1's (transfer_engine/wire_v1.h), unchanged since.
enum class MessageType : uint16_t {
  kHello = v1::kHello,                        // client -> server: version, client nonce
  kChallenge = v1::kChallenge,                // server -> client: server nonce
  kResponse = v1::kResponse,                  // client -> server: client's MAC
  kAuthOk = v1::kAuthOk,                      // server -> client: server's MAC (the client checks the server too)
  kAuthRefused = v1::kAuthRefused,            // server -> client: nothing else (no name, no size)
  kOpen = v1::kOpen,                          // open a region by name
  kOpenReply = v1::kOpenReply,                // handle, size, meta, fast-path offer
  kFastConnect = v1::kFastConnect,            // handle, fast-path request blob
  kFastConnectReply = v1::kFastConnectReply,  // fast-path reply blob
  kRead = v1::kRead,                          // handle, offset, len, tag
  kData = v1::kData,                          // tag, offset, len, then len bytes
  kError = v1::kError,                        // code, tag, text
  kClose = v1::kClose,                        // either side, nothing follows
};
inline constexpr uint16_t kMaxMessageType = v1::kMaxMessageType;

// Why a request failed, sent in an Error frame. Stable numbers (the protocol's), never reused.
enum class ErrorCode : uint16_t {
  kProtocol = v1::kErrorProtocol,  // malformed or unexpected frame: the connection closes
  kUnsupportedVersion = v1::kErrorUnsupportedVersion,
  kNotFound = v1::kErrorNotFound,  // no such region on this node
  kNotReady = v1::kErrorNotReady,  // the region changed under the reader (a newer save): try another copy
  kBadHandle = v1::kErrorBadHandle,
  kOutOfRange = v1::kErrorOutOfRange,  // offset/len outside the region or a read above kMaxReadBytes
  kNoFastPath = v1::kErrorNoFastPath,  // fast connect on a region without an offer, or Accept failed
  kTooManyOpen = v1::kErrorTooManyOpen,
  kInternal = v1::kErrorInternal,
};
const char* ErrorCodeName(ErrorCode code);
// The Status a client reports for an Error frame (NotFound, NotReady, ...).
Status StatusFromError(ErrorCode code, std::string_view text);

const char* MessageTypeName(MessageType type);
// Largest payload a frame of `type` may carry, sealed (transfer_engine/channel.h) where the type is
// sent after the handshake; the header parser enforces it.
uint64_t MaxPayload(MessageType type);

struct FrameHeader {
  uint16_t version = 0;
  MessageType type = MessageType::kClose;
  uint32_t length = 0;  // payload bytes after the header
};

// Checks magic, version (== `version`), type and the length bound of `type`. Another version is
// Unsupported, naming both and which side to upgrade.
Status ParseHeader(const uint8_t* bytes /* kHeaderBytes */, FrameHeader* out,
                   uint32_t version = kProtocolVersion);
// The version field of a frame header, unchecked: which version a refused peer spoke.
uint16_t FrameVersion(const uint8_t* bytes /* kHeaderBytes */);
void EncodeHeader(MessageType type, uint32_t length, uint8_t* out /* kHeaderBytes */,
                  uint32_t version = kProtocolVersion);

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

struct Hello {
  uint32_t max_version = 0;  // highest version the client speaks
  Nonce client_nonce{};
  bool operator==(const Hello&) const = default;
};
struct Challenge {
  Nonce server_nonce{};
  bool operator==(const Challenge&) const = default;
};
struct Response {
  Mac mac{};
  bool operator==(const Response&) const = default;
};
struct AuthOk {
  Mac mac{};
  bool operator==(const AuthOk&) const = default;
};
inline constexpr uint32_t kOpenWantsFastPath = v2::kOpenWantsFastPath;  // Open::flags: put the fast-path offer in the reply
inline constexpr uint32_t kOpenEncryptData = v2::kOpenEncryptData;      // Open::flags: data frames of this handle encrypted
struct Open {
  uint32_t flags = 0;
  std::string name;
  bool operator==(const Open&) const = default;
};
struct OpenReply {
  uint32_t handle = 0;
  uint64_t size = 0;
  std::string meta;
  std::string offer;
  bool operator==(const OpenReply&) const = default;
};
struct FastConnect {
  uint32_t handle = 0;
  std::string request;
  bool operator==(const FastConnect&) const = default;
};
struct FastConnectReply {
  std::string reply;
  bool operator==(const FastConnectReply&) const = default;
};
struct Read {
  uint32_t handle = 0;
  uint64_t offset = 0;
  uint32_t len = 0;
  uint64_t tag = 0;
  bool operator==(const Read&) const = default;
};
struct DataHeader {
  uint64_t tag = 0;
  uint64_t offset = 0;
  uint32_t len = 0;
  bool operator==(const DataHeader&) const = default;
};
struct Error {
  ErrorCode code = ErrorCode::kInternal;
  uint64_t tag = 0;  // the Read's tag when the error answers one; 0 otherwise
  std::string text;
  bool operator==(const Error&) const = default;
};

// Whole frames (header + payload), version kProtocolVersion unless told.
std::string EncodeHello(const Hello& m);
std::string EncodeChallenge(const Challenge& m);
std::string EncodeResponse(const Response& m);
std::string EncodeAuthOk(const AuthOk& m);
std::string EncodeAuthRefused();
std::string EncodeOpen(const Open& m);
std::string EncodeOpenReply(const OpenReply& m);
std::string EncodeFastConnect(const FastConnect& m);
std::string EncodeFastConnectReply(const FastConnectReply& m);
std::string EncodeRead(const Read& m);
std::string EncodeError(const Error& m);
std::string EncodeClose();
// The answer to a frame of another version before the handshake: an unsupported-version error
// carrying `text`, framed in `peer_version` when that is a version that shipped before this
// one (kOldestShippedVersion..; its error frame is ours, so that peer reads it and says why),
// in kProtocolVersion otherwise.
std::string EncodeVersionRefusal(uint16_t peer_version, std::string_view text);
// The header and data header of a Data frame (kHeaderBytes + kDataHeaderBytes); the len data
// bytes follow on the wire, sent from the region without a copy.
void EncodeDataPrefix(const DataHeader& m, uint8_t* out /* kHeaderBytes + kDataHeaderBytes */);

// Payload decoders (the bytes after a header ParseHeader admitted for that type). Corrupt on
// any length mismatch, bound or bad value; *out is set only on success.
Status DecodeHello(std::string_view payload, Hello* out);
Status DecodeChallenge(std::string_view payload, Challenge* out);
Status DecodeResponse(std::string_view payload, Response* out);
Status DecodeAuthOk(std::string_view payload, AuthOk* out);
Status DecodeOpen(std::string_view payload, Open* out);
Status DecodeOpenReply(std::string_view payload, OpenReply* out);
Status DecodeFastConnect(std::string_view payload, FastConnect* out);
Status DecodeFastConnectReply(std::string_view payload, FastConnectReply* out);
Status DecodeRead(std::string_view payload, Read* out);
// The first kDataHeaderBytes of a Data payload; checks len == payload_length - kDataHeaderBytes.
Status DecodeDataHeader(std::string_view prefix, uint32_t payload_length, DataHeader* out);
Status DecodeError(std::string_view payload, Error* out);
// AuthRefused and Close carry nothing.
Status DecodeEmpty(std::string_view payload, MessageType type);

}  // namespace ft::rdma::wire

#endif  // FT_TRANSFER_ENGINE_WIRE_H_

#include "transfer_engine/wire.h"

#include <fmt/format.h>

#include <cstring>

#include "common/names.h"

namespace ft::rdma::wire {
namespace {

// Explicit little-endian stores and loads: the byte order is the protocol's, not the host's.
void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Builds one frame: the header is filled in by Finish() once the payload is complete.
class FrameWriter {
 public:
  explicit FrameWriter(MessageType type, uint32_t version = kProtocolVersion)
      : type_(type), version_(version) {
    bytes_.resize(kHeaderBytes);
  }
  FrameWriter& U16(uint16_t v) { return Append(2, [&](uint8_t* p) { Put16(p, v); }); }
  FrameWriter& U32(uint32_t v) { return Append(4, [&](uint8_t* p) { Put32(p, v); }); }
  FrameWriter& U64(uint64_t v) { return Append(8, [&](uint8_t* p) { Put64(p, v); }); }
  FrameWriter& Raw(std::string_view s) {
    bytes_.append(s);
    return *this;
  }
  template <size_t N>
  FrameWriter& Raw(const std::array<uint8_t, N>& a) {
    return Raw(std::string_view(reinterpret_cast<const char*>(a.data()), N));
  }
  std::string Finish() {
    EncodeHeader(type_, static_cast<uint32_t>(bytes_.size() - kHeaderBytes),
                 reinterpret_cast<uint8_t*>(bytes_.data()), version_);
    return std::move(bytes_);
  }

 private:
  template <typename F>
  FrameWriter& Append(size_t n, F put) {
    size_t at = bytes_.size();
    bytes_.resize(at + n);
    put(reinterpret_cast<uint8_t*>(bytes_.data()) + at);
    return *this;
  }
  MessageType type_;
  uint32_t version_;
  std::string bytes_;
};

// Reads a payload front to back; every read checks what is left, so a short payload is an
// error, never a read past the end.
class PayloadReader {
 public:
  PayloadReader(std::string_view payload, const char* what) : rest_(payload), what_(what) {}
  bool U16(uint16_t* v) { return Take(2, [&](const uint8_t* p) { *v = Get16(p); }); }
  bool U32(uint32_t* v) { return Take(4, [&](const uint8_t* p) { *v = Get32(p); }); }
  bool U64(uint64_t* v) { return Take(8, [&](const uint8_t* p) { *v = Get64(p); }); }
  bool Bytes(size_t n, std::string* out) {
    if (rest_.size() < n) return Short();
    out->assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }
  template <size_t N>
  bool Array(std::array<uint8_t, N>* out) {
    return Take(N, [&](const uint8_t* p) { std::memcpy(out->data(), p, N); });
  }
  // A length-prefixed string whose length may not exceed `max`.
  bool String32(size_t max, const char* field, std::string* out) {
    uint32_t n = 0;
    if (!U32(&n)) return false;
    if (n > max) return Fail(fmt::format("{} of {} bytes exceeds the limit of {}", field, n, max));
    return Bytes(n, out);
  }
  bool String16(size_t max, const char* field, std::string* out) {
    uint16_t n = 0;
    if (!U16(&n)) return false;
    if (n > max) return Fail(fmt::format("{} of {} bytes exceeds the limit of {}", field, n, max));
    return Bytes(n, out);
  }
  bool Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }
  // OK when every read succeeded and nothing is left over.
  Status Done() {
    if (error_.empty() && !rest_.empty())
      error_ = fmt::format("{} trailing bytes", rest_.size());
    if (error_.empty()) return Status::Ok();
    return Status::Corrupt(fmt::format("{} message: {}", what_, error_));
  }

 private:
  template <typename F>
  bool Take(size_t n, F get) {
    if (rest_.size() < n) return Short();
    get(reinterpret_cast<const uint8_t*>(rest_.data()));
    rest_.remove_prefix(n);
    return true;
  }
  bool Short() { return Fail("truncated"); }
  std::string_view rest_;
  const char* what_;
  std::string error_;
};

// One payload decoded by `read` (which records what is wrong in the reader); *out set only when
// the whole payload was read and found right.
template <typename M, typename ReadFields>
Status Decode(std::string_view payload, const char* what, M* out, ReadFields read) {
  PayloadReader r(payload, what);
  M m;
  read(r, m);
  FT_RETURN_IF_ERROR(r.Done());
  *out = std::move(m);
  return Status::Ok();
}

constexpr Named<MessageType> kMessageTypeNames[] = {
    {MessageType::kHello, "hello"}, {MessageType::kChallenge, "challenge"},
    {MessageType::kResponse, "response"}, {MessageType::kAuthOk, "auth-ok"},
    {MessageType::kAuthRefused, "auth-refused"}, {MessageType::kOpen, "open"},
    {MessageType::kOpenReply, "open-reply"}, {MessageType::kFastConnect, "fast-connect"},
    {MessageType::kFastConnectReply, "fast-connect-reply"}, {MessageType::kRead, "read"},
    {MessageType::kData, "data"}, {MessageType::kError, "error"}, {MessageType::kClose, "close"}};
static_assert(NamesAreUnique(kMessageTypeNames));

constexpr Named<ErrorCode> kErrorCodeNames[] = {
    {ErrorCode::kProtocol, "protocol"}, {ErrorCode::kUnsupportedVersion, "unsupported-version"},
    {ErrorCode::kNotFound, "not-found"}, {ErrorCode::kNotReady, "not-ready"},
    {ErrorCode::kBadHandle, "bad-handle"}, {ErrorCode::kOutOfRange, "out-of-range"},
    {ErrorCode::kNoFastPath, "no-fast-path"}, {ErrorCode::kTooManyOpen, "too-many-open"},
    {ErrorCode::kInternal, "internal"}};
static_assert(NamesAreUnique(kErrorCodeNames));
}  // namespace

const char* MessageTypeName(MessageType type) { return NameIn(kMessageTypeNames, type, "unknown"); }
const char* ErrorCodeName(ErrorCode code) { return NameIn(kErrorCodeNames, code, "unknown"); }

Status StatusFromError(ErrorCode code, std::string_view text) {
  std::string message = fmt::format("peer refused ({}): {}", ErrorCodeName(code), text);
  switch (code) {
    case ErrorCode::kNotFound: return Status::NotFound(message);
    case ErrorCode::kNotReady: return Status::NotReady(message);
    case ErrorCode::kUnsupportedVersion: return Status::Unsupported(message);
    case ErrorCode::kBadHandle:
    case ErrorCode::kOutOfRange: return Status::InvalidArgument(message);
    case ErrorCode::kNoFastPath:
    case ErrorCode::kTooManyOpen: return Status::Unavailable(message);
    case ErrorCode::kProtocol: return Status::Corrupt(message);
    case ErrorCode::kInternal: return Status::Internal(message);
  }
  return Status::Corrupt(message);
}

uint64_t MaxPayload(MessageType type) { return v2::MaxPayload(static_cast<uint16_t>(type)); }

void EncodeHeader(MessageType type, uint32_t length, uint8_t* out, uint32_t version) {
  Put32(out, kMagic);
  Put16(out + 4, static_cast<uint16_t>(version));
  Put16(out + 6, static_cast<uint16_t>(type));
  Put32(out + 8, length);
}

uint16_t FrameVersion(const uint8_t* bytes) { return Get16(bytes + 4); }

Status ParseHeader(const uint8_t* bytes, FrameHeader* out, uint32_t version) {
  uint32_t magic = Get32(bytes);
  if (magic != kMagic)
    return Status::Corrupt(fmt::format("not an ft transfer frame (magic {:#010x}, expected {:#010x})",
                                       magic, kMagic));
  uint16_t frame_version = FrameVersion(bytes);
  if (frame_version != version) {
    // Which side to upgrade: the one on the older version (a version that shipped before this
    // one is never spoken again, transfer_engine/wire_v1.h says why).
    std::string which = frame_version > version ? ": upgrade this side"
                        : frame_version >= kOldestShippedVersion
                            ? fmt::format("; version {} is no longer spoken: upgrade the side on it", frame_version)
                            : "";
    return Status::Unsupported(fmt::format(
        "transfer protocol version {} is not supported (this side speaks version {}{})",
        frame_version, version, which));
  }
  uint16_t type = Get16(bytes + 6);
  if (type == 0 || type > kMaxMessageType)
    return Status::Corrupt(fmt::format("unknown transfer message type {}", type));
  uint32_t length = Get32(bytes + 8);
  MessageType message_type = static_cast<MessageType>(type);
  if (length > MaxPayload(message_type))
    return Status::Corrupt(fmt::format("{} frame of {} bytes exceeds its limit of {}",
                                       MessageTypeName(message_type), length,
                                       MaxPayload(message_type)));
  out->version = frame_version;
  out->type = message_type;
  out->length = length;
  return Status::Ok();
}

std::string EncodeHello(const Hello& m) {
  return FrameWriter(MessageType::kHello).U32(m.max_version).Raw(m.client_nonce).Finish();
}
std::string EncodeChallenge(const Challenge& m) {
  return FrameWriter(MessageType::kChallenge).Raw(m.server_nonce).Finish();
}
std::string EncodeResponse(const Response& m) {
  return FrameWriter(MessageType::kResponse).Raw(m.mac).Finish();
}
std::string EncodeAuthOk(const AuthOk& m) {
  return FrameWriter(MessageType::kAuthOk).Raw(m.mac).Finish();
}
std::string EncodeAuthRefused() { return FrameWriter(MessageType::kAuthRefused).Finish(); }
std::string EncodeOpen(const Open& m) {
  return FrameWriter(MessageType::kOpen)
      .U32(m.flags)
      .U16(static_cast<uint16_t>(m.name.size()))
      .Raw(m.name)
      .Finish();
}
std::string EncodeOpenReply(const OpenReply& m) {
  return FrameWriter(MessageType::kOpenReply)
      .U32(m.handle)
      .U64(m.size)
      .U32(static_cast<uint32_t>(m.meta.size()))
      .Raw(m.meta)
      .U32(static_cast<uint32_t>(m.offer.size()))
      .Raw(m.offer)
      .Finish();
}
std::string EncodeFastConnect(const FastConnect& m) {
  return FrameWriter(MessageType::kFastConnect)
      .U32(m.handle)
      .U32(static_cast<uint32_t>(m.request.size()))
      .Raw(m.request)
      .Finish();
}
std::string EncodeFastConnectReply(const FastConnectReply& m) {
  return FrameWriter(MessageType::kFastConnectReply)
      .U32(static_cast<uint32_t>(m.reply.size()))
      .Raw(m.reply)
      .Finish();
}
std::string EncodeRead(const Read& m) {
  return FrameWriter(MessageType::kRead).U32(m.handle).U64(m.offset).U32(m.len).U64(m.tag).Finish();
}
namespace {
// An error frame of `version`: its layout is version 1's in every version so far (wire_v2.h).
std::string EncodeErrorIn(const Error& m, uint32_t version) {
  std::string_view text = std::string_view(m.text).substr(0, kMaxErrorTextBytes);
  return FrameWriter(MessageType::kError, version)
      .U16(static_cast<uint16_t>(m.code))
      .U64(m.tag)
      .U16(static_cast<uint16_t>(text.size()))
      .Raw(text)
      .Finish();
}
}  // namespace

std::string EncodeError(const Error& m) { return EncodeErrorIn(m, kProtocolVersion); }

std::string EncodeVersionRefusal(uint16_t peer_version, std::string_view text) {
  bool shipped_before = peer_version >= kOldestShippedVersion && peer_version < kProtocolVersion;
  return EncodeErrorIn({ErrorCode::kUnsupportedVersion, 0, std::string(text)},
                       shipped_before ? peer_version : kProtocolVersion);
}
std::string EncodeClose() { return FrameWriter(MessageType::kClose).Finish(); }

void EncodeDataPrefix(const DataHeader& m, uint8_t* out) {
  EncodeHeader(MessageType::kData, static_cast<uint32_t>(kDataHeaderBytes + m.len), out);
  Put64(out + kHeaderBytes, m.tag);
  Put64(out + kHeaderBytes + 8, m.offset);
  Put32(out + kHeaderBytes + 16, m.len);
}

Status DecodeHello(std::string_view payload, Hello* out) {
  return Decode(payload, "hello", out, [](PayloadReader& r, Hello& m) {
    if (r.U32(&m.max_version) && r.Array(&m.client_nonce) && m.max_version == 0)
      r.Fail("version 0");
  });
}

Status DecodeChallenge(std::string_view payload, Challenge* out) {
  return Decode(payload, "challenge", out, [](PayloadReader& r, Challenge& m) {
    (void)r.Array(&m.server_nonce);
  });
}

Status DecodeResponse(std::string_view payload, Response* out) {
  return Decode(payload, "response", out, [](PayloadReader& r, Response& m) {
    (void)r.Array(&m.mac);
  });
}

Status DecodeAuthOk(std::string_view payload, AuthOk* out) {
  return Decode(payload, "auth-ok", out, [](PayloadReader& r, AuthOk& m) {
    (void)r.Array(&m.mac);
  });
}

Status DecodeOpen(std::string_view payload, Open* out) {
  return Decode(payload, "open", out, [](PayloadReader& r, Open& m) {
    if (r.U32(&m.flags) && r.String16(kMaxNameBytes, "region name", &m.name)) {
      if (m.name.empty()) r.Fail("empty region name");
      if (m.flags & ~(kOpenWantsFastPath | kOpenEncryptData))
        r.Fail(fmt::format("unknown flags {:#x}", m.flags));
    }
  });
}

Status DecodeOpenReply(std::string_view payload, OpenReply* out) {
  return Decode(payload, "open-reply", out, [](PayloadReader& r, OpenReply& m) {
    (void)(r.U32(&m.handle) && r.U64(&m.size) && r.String32(kMaxMetaBytes, "meta", &m.meta) &&
           r.String32(kMaxOfferBytes, "fast-path offer", &m.offer));
  });
}

Status DecodeFastConnect(std::string_view payload, FastConnect* out) {
  return Decode(payload, "fast-connect", out, [](PayloadReader& r, FastConnect& m) {
    (void)(r.U32(&m.handle) && r.String32(kMaxOfferBytes, "fast-path request", &m.request));
  });
}

Status DecodeFastConnectReply(std::string_view payload, FastConnectReply* out) {
  return Decode(payload, "fast-connect-reply", out, [](PayloadReader& r, FastConnectReply& m) {
    (void)r.String32(kMaxOfferBytes, "fast-path reply", &m.reply);
  });
}

Status DecodeRead(std::string_view payload, Read* out) {
  return Decode(payload, "read", out, [](PayloadReader& r, Read& m) {
    if (r.U32(&m.handle) && r.U64(&m.offset) && r.U32(&m.len) && r.U64(&m.tag)) {
      if (m.len == 0) r.Fail("read of 0 bytes");
      if (m.len > kMaxReadBytes)
        r.Fail(fmt::format("read of {} bytes exceeds the limit of {}", m.len, kMaxReadBytes));
    }
  });
}

Status DecodeDataHeader(std::string_view prefix, uint32_t payload_length, DataHeader* out) {
  return Decode(prefix, "data", out, [payload_length](PayloadReader& r, DataHeader& m) {
    if (r.U64(&m.tag) && r.U64(&m.offset) && r.U32(&m.len)) {
      if (m.len == 0) r.Fail("data of 0 bytes");
      if (payload_length < kDataHeaderBytes || m.len != payload_length - kDataHeaderBytes)
        r.Fail(fmt::format("data length {} does not match the frame's {} bytes", m.len,
                           payload_length));
    }
  });
}

Status DecodeError(std::string_view payload, Error* out) {
  return Decode(payload, "error", out, [](PayloadReader& r, Error& m) {
    uint16_t code = 0;
    if (r.U16(&code) && r.U64(&m.tag) && r.String16(kMaxErrorTextBytes, "error text", &m.text)) {
      if (code == 0 || code > static_cast<uint16_t>(ErrorCode::kInternal))
        r.Fail(fmt::format("unknown error code {}", code));
      m.code = static_cast<ErrorCode>(code);
    }
  });
}

Status DecodeEmpty(std::string_view payload, MessageType type) {
  if (!payload.empty())
    return Status::Corrupt(fmt::format("{} message: {} unexpected bytes", MessageTypeName(type),
                                       payload.size()));
  return Status::Ok();
}

}  // namespace ft::rdma::wire

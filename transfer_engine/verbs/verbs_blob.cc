#include "transfer_engine/verbs/verbs_blob.h"

#include <infiniband/verbs.h>

#include <cstring>

#include <fmt/format.h>

#include "transfer_engine/verbs/verbs_blob_v1.h"

namespace ft::rdma {
namespace {

// Version 1's layout (verbs_blob_v1.h), the version this build writes and reads.
namespace v1 = verbs_blob::v1;
static_assert(kVerbsBlobVersion == v1::kVersion, "a new version freezes its layout in verbs_blob_v<N>.h");
constexpr const char (&kOfferMagic)[4] = v1::kOfferMagic;
constexpr const char (&kRequestMagic)[4] = v1::kRequestMagic;
constexpr const char (&kReplyMagic)[4] = v1::kReplyMagic;
constexpr uint32_t kMax24Bits = (1u << 24) - 1;  // QP numbers and PSNs are 24-bit
constexpr size_t kAddressBytes = sizeof(v1::PortAddress);
constexpr size_t kSegmentBytes = sizeof(v1::Segment);
constexpr size_t kQpBytes = sizeof(v1::Qp);

class Writer {
 public:
  void Bytes(const void* data, size_t n) { out_.append(static_cast<const char*>(data), n); }
  template <typename T>
  void Le(T value) {
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
  void Header(const char (&magic)[4]) {
    Bytes(magic, 4);
    Le<uint16_t>(kVerbsBlobVersion);
    Le<uint16_t>(0);  // flags, none defined in version 1
  }
  void Address(const VerbsPortAddress& a) {
    Le(a.lid);
    Bytes(a.gid, 16);
    Le(a.use_gid);
    Le(a.gid_index);
    Le(a.link_layer);
    Le(a.port);
    Le(a.mtu);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what the caller checked is there: every Parse* checks the exact total size from the
// counts before reading the variable part.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - at_; }
  template <typename T>
  T Le() {
    T value = 0;
    for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(static_cast<uint8_t>(bytes_[at_ + i])) << (8 * i);
    at_ += sizeof(T);
    return value;
  }
  void Bytes(void* out, size_t n) {
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

Status ParseHeader(Reader* r, const char (&magic)[4], const char* what, size_t fixed_bytes) {
  if (r->left() < 8 + fixed_bytes) {
    return Status::Corrupt(fmt::format("verbs {}: {} bytes, need at least {}", what, r->left(), 8 + fixed_bytes));
  }
  char got[4];
  r->Bytes(got, 4);
  if (std::memcmp(got, magic, 4) != 0) return Status::Corrupt(fmt::format("verbs {}: bad magic", what));
  uint16_t version = r->Le<uint16_t>();
  uint16_t flags = r->Le<uint16_t>();
  if (version != kVerbsBlobVersion) {
    return Status::Unsupported(fmt::format("verbs {} version {}, this build speaks {}: upgrade one side",
                                           what, version, kVerbsBlobVersion));
  }
  if (flags != 0) return Status::Corrupt(fmt::format("verbs {}: unknown flags {:#x}", what, flags));
  return Status::Ok();
}

Status ParseAddress(Reader* r, const char* what, VerbsPortAddress* a) {
  a->lid = r->Le<uint16_t>();
  r->Bytes(a->gid, 16);
  a->use_gid = r->Le<uint8_t>();
  a->gid_index = r->Le<uint8_t>();
  a->link_layer = r->Le<uint8_t>();
  a->port = r->Le<uint8_t>();
  a->mtu = r->Le<uint8_t>();
  if (a->use_gid > 1) return Status::Corrupt(fmt::format("verbs {}: use_gid {}", what, a->use_gid));
  if (a->link_layer > IBV_LINK_LAYER_ETHERNET) {
    return Status::Corrupt(fmt::format("verbs {}: link layer {}", what, a->link_layer));
  }
  if (a->port == 0) return Status::Corrupt(fmt::format("verbs {}: port 0", what));
  if (a->mtu < IBV_MTU_256 || a->mtu > IBV_MTU_4096) return Status::Corrupt(fmt::format("verbs {}: mtu code {}", what, a->mtu));
  return Status::Ok();
}

// The header and the sender's port address that open an offer and a connect request;
// `fixed_bytes`: what follows the address before the variable part.
Status ParseAddressed(Reader* r, const char (&magic)[4], const char* what, size_t fixed_bytes,
                      VerbsPortAddress* a) {
  FT_RETURN_IF_ERROR(ParseHeader(r, magic, what, kAddressBytes + fixed_bytes));
  return ParseAddress(r, what, a);
}

Status ParseQps(Reader* r, const char* what, std::vector<VerbsQpInfo>* qps) {
  uint32_t count = r->Le<uint32_t>();
  if (count == 0 || count > kMaxVerbsQps) return Status::Corrupt(fmt::format("verbs {}: {} queue pairs", what, count));
  if (r->left() != count * kQpBytes) {
    return Status::Corrupt(fmt::format("verbs {}: {} bytes for {} queue pairs", what, r->left(), count));
  }
  qps->resize(count);
  for (VerbsQpInfo& qp : *qps) {
    qp.qp_num = r->Le<uint32_t>();
    qp.psn = r->Le<uint32_t>();
    if (qp.qp_num > kMax24Bits || qp.psn > kMax24Bits) {
      return Status::Corrupt(fmt::format("verbs {}: qp number {} or psn {} beyond 24 bits", what, qp.qp_num, qp.psn));
    }
  }
  return Status::Ok();
}

void WriteQps(Writer* w, const std::vector<VerbsQpInfo>& qps) {
  w->Le(static_cast<uint32_t>(qps.size()));
  for (const VerbsQpInfo& qp : qps) {
    w->Le(qp.qp_num);
    w->Le(qp.psn);
  }
}

}  // namespace

std::string EncodeVerbsOffer(const VerbsOffer& offer) {
  Writer w;
  w.Header(kOfferMagic);
  w.Address(offer.address);
  w.Le(offer.region_bytes);
  w.Le(static_cast<uint32_t>(offer.segments.size()));
  for (const VerbsSegment& s : offer.segments) {
    w.Le(s.offset);
    w.Le(s.len);
    w.Le(s.addr);
    w.Le(s.rkey);
  }
  return w.Take();
}

Status ParseVerbsOffer(std::string_view bytes, VerbsOffer* out) {
  Reader r(bytes);
  VerbsOffer offer;
  FT_RETURN_IF_ERROR(ParseAddressed(&r, kOfferMagic, "offer", 8 + 4, &offer.address));
  offer.region_bytes = r.Le<uint64_t>();
  uint32_t count = r.Le<uint32_t>();
  if (count == 0 || count > kMaxVerbsSegments) return Status::Corrupt(fmt::format("verbs offer: {} segments", count));
  if (r.left() != count * kSegmentBytes) {
    return Status::Corrupt(fmt::format("verbs offer: {} bytes for {} segments", r.left(), count));
  }
  offer.segments.resize(count);
  uint64_t next = 0;
  for (VerbsSegment& s : offer.segments) {
    s.offset = r.Le<uint64_t>();
    s.len = r.Le<uint64_t>();
    s.addr = r.Le<uint64_t>();
    s.rkey = r.Le<uint32_t>();
    if (s.offset != next || s.len == 0 || s.len > offer.region_bytes - s.offset || s.addr + s.len < s.addr) {
      return Status::Corrupt(fmt::format("verbs offer: segment [{}, +{}) at {:#x} does not continue at {} within {} bytes",
                                         s.offset, s.len, s.addr, next, offer.region_bytes));
    }
    next = s.offset + s.len;
  }
  if (next != offer.region_bytes) {
    return Status::Corrupt(fmt::format("verbs offer: segments cover {} of {} bytes", next, offer.region_bytes));
  }
  *out = std::move(offer);
  return Status::Ok();
}

std::string EncodeVerbsConnectRequest(const VerbsConnectRequest& request) {
  Writer w;
  w.Header(kRequestMagic);
  w.Address(request.address);
  w.Le(request.rd_atomic);
  WriteQps(&w, request.qps);
  return w.Take();
}

Status ParseVerbsConnectRequest(std::string_view bytes, VerbsConnectRequest* out) {
  Reader r(bytes);
  VerbsConnectRequest request;
  FT_RETURN_IF_ERROR(ParseAddressed(&r, kRequestMagic, "connect request", 1 + 4, &request.address));
  request.rd_atomic = r.Le<uint8_t>();
  if (request.rd_atomic == 0) return Status::Corrupt("verbs connect request: 0 reads in flight");
  FT_RETURN_IF_ERROR(ParseQps(&r, "connect request", &request.qps));
  *out = std::move(request);
  return Status::Ok();
}

std::string EncodeVerbsAcceptReply(const VerbsAcceptReply& reply) {
  Writer w;
  w.Header(kReplyMagic);
  w.Le(reply.max_dest_rd_atomic);
  WriteQps(&w, reply.qps);
  return w.Take();
}

Status ParseVerbsAcceptReply(std::string_view bytes, VerbsAcceptReply* out) {
  Reader r(bytes);
  FT_RETURN_IF_ERROR(ParseHeader(&r, kReplyMagic, "accept reply", 1 + 4));
  VerbsAcceptReply reply;
  reply.max_dest_rd_atomic = r.Le<uint8_t>();
  if (reply.max_dest_rd_atomic == 0) return Status::Corrupt("verbs accept reply: 0 reads in flight");
  FT_RETURN_IF_ERROR(ParseQps(&r, "accept reply", &reply.qps));
  *out = std::move(reply);
  return Status::Ok();
}

}  // namespace ft::rdma

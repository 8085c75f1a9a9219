// The three blobs of the verbs fast path, carried inside the TCP engine's messages (see
// docs/transfer-protocol.md, "verbs fast path"): the server's offer (in the open reply), the
// client's connect request and the server's accept reply (through the Exchange). Binary,
// little-endian, each starting with a 4-byte magic and a u16 version; parsed strictly: a blob
// with a wrong size, an unknown version, counts out of range or segments that do not tile the
// region is rejected (Corrupt or Unsupported) and the output is left untouched.
#ifndef FT_TRANSFER_ENGINE_VERBS_VERBS_BLOB_H_
#define FT_TRANSFER_ENGINE_VERBS_VERBS_BLOB_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::rdma {

inline constexpr uint16_t kVerbsBlobVersion = 1;
inline constexpr uint32_t kMaxVerbsQps = 64;           // per connection
inline constexpr uint32_t kMaxVerbsSegments = 1 << 16;  // memory regions per offered region

// How to reach one port: by LID (InfiniBand) and, when use_gid, by GID (RoCE, or routed IB).
struct VerbsPortAddress {
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  uint8_t use_gid = 0;     // 1: the peer must address this port through the GRH
  uint8_t gid_index = 0;   // this side's GID table index (its sgid_index)
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  uint8_t port = 0;
  uint8_t mtu = 0;         // ibv_mtu of the port
  bool operator==(const VerbsPortAddress&) const = default;
};

// One registered memory region of the offered bytes: [offset, offset + len) of the region is
// readable at remote address addr with rkey.
struct VerbsSegment {
  uint64_t offset = 0;
  uint64_t len = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  bool operator==(const VerbsSegment&) const = default;
};

struct VerbsOffer {
  uint64_t region_bytes = 0;
  VerbsPortAddress address;
  std::vector<VerbsSegment> segments;  // tile [0, region_bytes) in order
  bool operator==(const VerbsOffer&) const = default;
};

struct VerbsQpInfo {
  uint32_t qp_num = 0;
  uint32_t psn = 0;  // 24 bits
  bool operator==(const VerbsQpInfo&) const = default;
};

struct VerbsConnectRequest {
  VerbsPortAddress address;
  uint8_t rd_atomic = 0;  // reads the client wants in flight per QP (initiator depth)
  std::vector<VerbsQpInfo> qps;
  bool operator==(const VerbsConnectRequest&) const = default;
};

struct VerbsAcceptReply {
  uint8_t max_dest_rd_atomic = 0;  // reads the server's QPs accept in flight (responder depth)
  std::vector<VerbsQpInfo> qps;    // one per requested QP, same order
  bool operator==(const VerbsAcceptReply&) const = default;
};

std::string EncodeVerbsOffer(const VerbsOffer& offer);
Status ParseVerbsOffer(std::string_view bytes, VerbsOffer* out);
std::string EncodeVerbsConnectRequest(const VerbsConnectRequest& request);
Status ParseVerbsConnectRequest(std::string_view bytes, VerbsConnectRequest* out);
std::string EncodeVerbsAcceptReply(const VerbsAcceptReply& reply);
Status ParseVerbsAcceptReply(std::string_view bytes, VerbsAcceptReply* out);

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_VERBS_VERBS_BLOB_H_

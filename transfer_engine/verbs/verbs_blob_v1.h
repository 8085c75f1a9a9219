// Version 1 of the verbs fast path's blobs (transfer_engine/verbs/verbs_blob.h), the only version
// shipped so far (6536e6b), frozen: a new version leaves this file as it is, describes itself in a
// verbs_blob_v<N>.h of its own, and its reader goes beside version 1's (docs/transfer-protocol.md,
// "Versions"). transfer_engine/verbs/tests/verbs_blob_test.cc pins it with bytes version 1 wrote.
//
// The structs describe byte positions, little-endian, no padding; the codec reads and writes
// bytes explicitly. Each blob is its header, then (offer) an address, region bytes, a segment
// count and the segments; (connect request) an address, reads in flight, a QP count and the
// QPs; (accept reply) reads in flight, a QP count and the QPs.
#ifndef FT_TRANSFER_ENGINE_VERBS_VERBS_BLOB_V1_H_
#define FT_TRANSFER_ENGINE_VERBS_VERBS_BLOB_V1_H_

#include <cstddef>
#include <cstdint>

namespace ft::rdma::verbs_blob::v1 {

inline constexpr uint16_t kVersion = 1;
inline constexpr char kOfferMagic[4] = {'F', 'T', 'V', 'O'};
inline constexpr char kRequestMagic[4] = {'F', 'T', 'V', 'C'};
inline constexpr char kReplyMagic[4] = {'F', 'T', 'V', 'A'};

#pragma pack(push, 1)
struct Header {
  char magic[4];     // 0
  uint16_t version;  // 4: 1
  uint16_t flags;    // 6: 0, none defined
};
struct PortAddress {
  uint16_t lid;        // 0
  uint8_t gid[16];     // 2
  uint8_t use_gid;     // 18
  uint8_t gid_index;   // 19
  uint8_t link_layer;  // 20
  uint8_t port;        // 21
  uint8_t mtu;         // 22
};
struct OfferFixed {  // then segment_count Segments
  Header header;
  PortAddress address;     // 8
  uint64_t region_bytes;   // 31
  uint32_t segment_count;  // 39
};
struct Segment {
  uint64_t offset;  // 0
  uint64_t len;     // 8
  uint64_t addr;    // 16
  uint32_t rkey;    // 24
};
struct ConnectRequestFixed {  // then qp_count Qps
  Header header;
  PortAddress address;  // 8
  uint8_t rd_atomic;    // 31
  uint32_t qp_count;    // 32
};
struct AcceptReplyFixed {  // then qp_count Qps
  Header header;
  uint8_t max_dest_rd_atomic;  // 8
  uint32_t qp_count;           // 9
};
struct Qp {
  uint32_t qp_num;  // 0, 24 bits
  uint32_t psn;     // 4, 24 bits
};
#pragma pack(pop)

static_assert(sizeof(Header) == 8 && offsetof(Header, version) == 4 && offsetof(Header, flags) == 6);
static_assert(sizeof(PortAddress) == 23 && offsetof(PortAddress, use_gid) == 18 &&
              offsetof(PortAddress, mtu) == 22);
static_assert(sizeof(OfferFixed) == 43 && offsetof(OfferFixed, region_bytes) == 31 &&
              offsetof(OfferFixed, segment_count) == 39);
static_assert(sizeof(Segment) == 28 && offsetof(Segment, addr) == 16 && offsetof(Segment, rkey) == 24);
static_assert(sizeof(ConnectRequestFixed) == 36 && offsetof(ConnectRequestFixed, rd_atomic) == 31 &&
              offsetof(ConnectRequestFixed, qp_count) == 32);
static_assert(sizeof(AcceptReplyFixed) == 13 && offsetof(AcceptReplyFixed, qp_count) == 9);
static_assert(sizeof(Qp) == 8);

}  // namespace ft::rdma::verbs_blob::v1

#endif  // FT_TRANSFER_ENGINE_VERBS_VERBS_BLOB_V1_H_

// Peer-transfer values in Redis (docs/redis-schema.md, "Peer transfer"): where each worker's
// transfer server (rdma/transfer.h) listens. JSON, versioned ("v":1), decoded defensively like
// proto/codec.h (same limits, kCorrupt naming the field, kUnsupported for another version).
//
//   ft:{J}:transfer:secret   string: the job's secret, 64 hex digits (written by the master)
//   ft:{J}:endpoints         hash: node -> TransferEndpoint (written by that node's worker)
#ifndef FT_PROTO_TRANSFER_CODEC_H_
#define FT_PROTO_TRANSFER_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::proto {

// One node's transfer server, as its worker bound it.
struct TransferEndpoint {
  std::string node;
  std::string address;                  // the bound address (FT_LISTEN or the host's address)
  uint16_t port = 0;                    // 1..65535
  std::vector<std::string> transports;  // "tcp" always (the control channel); "verbs" first when offered
  int64_t unix_ms = 0;                  // when the server came up
  bool operator==(const TransferEndpoint&) const = default;
};

std::string Encode(const TransferEndpoint& value);
// Corrupt for a missing node or address, a port outside 1..65535, an unknown transport or a
// list without "tcp" (a client always needs the TCP control channel).
Status Decode(std::string_view json, TransferEndpoint* out);

}  // namespace ft::proto

#endif  // FT_PROTO_TRANSFER_CODEC_H_

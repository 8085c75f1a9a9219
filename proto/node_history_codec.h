// JSON encoding of proto/node_history.h: the records of a node's history and the cluster-wide
// cordons (docs/redis-schema.md, "Across jobs"). Same contract as proto/codec.h: "v" first,
// encoding never fails; decoding takes foreign bytes (anyone who can write the key could have
// written them), checks every field's type and range and returns kCorrupt naming the first bad
// field or kUnsupported for another schema version, never throws; `out` is set only on success.
#ifndef FT_PROTO_NODE_HISTORY_CODEC_H_
#define FT_PROTO_NODE_HISTORY_CODEC_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "proto/node_history.h"

namespace ft::proto {

std::string Encode(const NodeRecord& value);
std::string Encode(const CordonEntry& value);
Status Decode(std::string_view json, NodeRecord* out);
Status Decode(std::string_view json, CordonEntry* out);

}  // namespace ft::proto

#endif  // FT_PROTO_NODE_HISTORY_CODEC_H_

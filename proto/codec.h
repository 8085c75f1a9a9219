// JSON encoding of proto/messages.h. Encoding never fails. Decoding takes foreign bytes (a
// Redis value anyone could have written): it checks "v", every field's type and range, and
// returns kCorrupt naming the first bad field, or kUnsupported for another schema version.
// Unknown fields are ignored (a newer writer may add some); missing optional fields keep
// their defaults; fields listed as required in docs/redis-schema.md must be present.
#ifndef FT_PROTO_CODEC_H_
#define FT_PROTO_CODEC_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "proto/messages.h"

namespace ft::proto {

std::string Encode(const RankProgress& value);
std::string Encode(const Event& value);
std::string Encode(const RankSummary& value);
std::string Encode(const Membership& value);
std::string Encode(const TimeoutTable& value);
std::string Encode(const Command& value);
std::string Encode(const CommandAck& value);
std::string Encode(const Incident& value);

Status Decode(std::string_view json, RankProgress* out);
Status Decode(std::string_view json, Event* out);
Status Decode(std::string_view json, RankSummary* out);
Status Decode(std::string_view json, Membership* out);
Status Decode(std::string_view json, TimeoutTable* out);
Status Decode(std::string_view json, Command* out);
Status Decode(std::string_view json, CommandAck* out);
Status Decode(std::string_view json, Incident* out);

// Communicator ids are written as 16 lowercase hex digits (JSON numbers lose 64-bit ints).
std::string CommIdHex(uint64_t id);
bool ParseCommIdHex(std::string_view text, uint64_t* id);

}  // namespace ft::proto

#endif  // FT_PROTO_CODEC_H_

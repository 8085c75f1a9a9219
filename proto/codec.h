// JSON encoding of proto/messages.h. Encoding never fails. Decoding takes foreign bytes (a
// Redis value anyone could have written): it checks "v", every field's type and range, and
// returns kCorrupt naming the first bad field, or kUnsupported for another schema version.
// Unknown fields are ignored (a newer writer may add some); missing optional fields keep
// their defaults; fields listed as required in docs/redis-schema.md must be present. An
// Event's "progress" is optional to the reader (workers always write it). `out` is set only on
// success. All functions are pure: any thread may call them.
#ifndef FT_PROTO_CODEC_H_
#define FT_PROTO_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
std::string Encode(const WorkerHeartbeat& value);

Status Decode(std::string_view json, RankProgress* out);
Status Decode(std::string_view json, Event* out);
Status Decode(std::string_view json, RankSummary* out);
Status Decode(std::string_view json, Membership* out);
Status Decode(std::string_view json, TimeoutTable* out);
Status Decode(std::string_view json, Command* out);
Status Decode(std::string_view json, CommandAck* out);
Status Decode(std::string_view json, Incident* out);
Status Decode(std::string_view json, WorkerHeartbeat* out);

// Communicator ids are written as 16 lowercase hex digits (JSON numbers lose 64-bit ints).
std::string CommIdHex(uint64_t id);
bool ParseCommIdHex(std::string_view text, uint64_t* id);

// The `suspects` field of an incidents stream entry: "5@node1,7@node2" (rank@node, in order).
std::string SuspectsField(const std::vector<Suspect>& suspects);

// Limits on foreign bytes: larger values are kCorrupt, never an allocation storm.
inline constexpr size_t kMaxValueBytes = size_t{64} << 20;  // one whole JSON value
inline constexpr size_t kMaxListEntries = size_t{1} << 20;  // entries of any one list
inline constexpr size_t kMaxStringBytes = size_t{64} << 10; // any one string
inline constexpr int kMaxNesting = 16;                      // objects and arrays inside each other

}  // namespace ft::proto

#endif  // FT_PROTO_CODEC_H_

// The master's own durable values, kept as fields of its state hash ft:{J}:master
// (docs/redis-schema.md) so that a restarted or standby master continues where the last one
// stood: `action` (a decision being carried out) and `open_incident` (an incident window being
// collected). Same contract as codec.h: JSON with "v" first; decoding takes foreign bytes,
// checks every field's type and range, returns kCorrupt naming the first bad field or
// kUnsupported for another schema version, never throws; `out` is set only on success.
#ifndef FT_PROTO_MASTER_CODEC_H_
#define FT_PROTO_MASTER_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::proto {

// A rank asked to save its shard before the job stops.
struct SaveTarget {
  int rank = -1;
  std::string node;  // from membership; empty when unknown
  bool operator==(const SaveTarget&) const = default;
};

// `action`: a persisted decision being carried out. phase: "save" → "stop" → "done".
struct MasterAction {
  std::string incident;
  std::string decision;           // "save-then-stop" or "stop"
  std::vector<SaveTarget> save;
  std::string phase;              // "save", "stop", "done"
  bool sent = false;              // this phase's commands are in the streams
  std::string acks_from;          // acks stream id before they were sent
  int64_t deadline_unix_ms = 0;   // of this phase
  std::vector<std::string> nodes; // stop: the nodes commanded
  int64_t decided_unix_ms = 0;

  bool operator==(const MasterAction&) const = default;
};

// `open_incident`: an incident window being collected (its first event, when it opened, the
// busy outcomes written for it so far).
struct OpenIncident {
  std::string first_event_id;     // a stream id of ft:{J}:events
  int64_t first_event_unix_ms = 0;
  int64_t opened_unix_ms = 0;     // by the master's clock
  int outcomes = 0;               // busy outcomes written for this window
  std::string last_outcome;       // "busy:3,5"
  bool watching = false;          // a busy outcome stands; re-evaluated every hang_window

  bool operator==(const OpenIncident&) const = default;
};

std::string Encode(const MasterAction& value);
std::string Encode(const OpenIncident& value);
Status Decode(std::string_view json, MasterAction* out);
Status Decode(std::string_view json, OpenIncident* out);

}  // namespace ft::proto

#endif  // FT_PROTO_MASTER_CODEC_H_

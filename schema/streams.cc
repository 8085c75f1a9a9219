#include "schema/streams.h"

#include <fmt/format.h>

#include "proto/codec.h"

namespace ft::schema {

namespace {

// Caps (MAXLEN ~): events outlive a long incident window's reading; a node's commands and the
// acks are read within seconds of being written.
constexpr const char* kEventsCap = "100000";
constexpr const char* kAcksCap = "10000";
constexpr const char* kCommandsCap = "1000";

// The record of an entry: its json decoded, and its side field `field` (when present) saying
// what the record's `member` says. `what` names the entry in errors ("event 17-0: ...").
template <typename T>
Status DecodeEntry(const redis::StreamEntry& entry, const char* what, const char* field, std::string T::*member,
                   T* out) {
  const std::string* json = entry.Get("json");
  if (json == nullptr) return Status::Corrupt(fmt::format("{} {} has no json field", what, entry.id));
  T value;
  Status s = proto::Decode(*json, &value);
  if (!s.ok()) return s.WithContext(fmt::format("{} {}", what, entry.id));
  const std::string* side = entry.Get(field);
  if (side != nullptr && *side != value.*member) {
    return Status::Corrupt(fmt::format("{} {}: field {} '{}' but json {} '{}'", what, entry.id, field,
                                       side->substr(0, 32), field, (value.*member).substr(0, 32)));
  }
  *out = std::move(value);
  return Status::Ok();
}

}  // namespace

redis::Argv AppendEvent(const proto::Keys& keys, const proto::Event& event) {
  return {"XADD", keys.Events(), "MAXLEN", "~", kEventsCap, "*", "kind", event.kind, "rank", std::to_string(event.rank),
          "node", event.node, "json", proto::Encode(event)};
}

redis::Argv AppendAck(const proto::Keys& keys, const proto::CommandAck& ack) {
  return {"XADD", keys.Acks(), "MAXLEN", "~", kAcksCap, "*", "id", ack.id, "result", ack.result,
          "json", proto::Encode(ack)};
}

redis::Argv PostCommand(const proto::Keys& keys, std::string_view node, const proto::Command& command) {
  return {"XADD", keys.Commands(node), "MAXLEN", "~", kCommandsCap, "*", "kind", command.kind,
          "rank", std::to_string(command.rank), "json", proto::Encode(command)};
}

redis::Argv IncidentFields(const proto::Incident& incident) {
  return {"kind", incident.kind, "suspects", proto::SuspectsField(incident.suspects), "json", proto::Encode(incident)};
}

Status Decode(const redis::StreamEntry& entry, proto::Event* out) {
  return DecodeEntry(entry, "event", "kind", &proto::Event::kind, out);
}

Status Decode(const redis::StreamEntry& entry, proto::CommandAck* out) {
  return DecodeEntry(entry, "ack", "id", &proto::CommandAck::id, out);
}

Status Decode(const redis::StreamEntry& entry, proto::Command* out) {
  return DecodeEntry(entry, "command", "kind", &proto::Command::kind, out);
}

Status Decode(const redis::StreamEntry& entry, proto::Incident* out) {
  return DecodeEntry(entry, "incident", "kind", &proto::Incident::kind, out);
}

redis::Argv After(std::string_view key, std::string_view cursor, size_t count) {
  return {"XRANGE", std::string(key), cursor.empty() ? std::string("-") : fmt::format("({}", cursor), "+",
          "COUNT", std::to_string(count)};
}

redis::Argv Between(std::string_view key, std::string_view first, std::string_view last, size_t count) {
  return {"XRANGE", std::string(key), std::string(first), last.empty() ? std::string("+") : std::string(last),
          "COUNT", std::to_string(count)};
}

redis::Argv Newest(std::string_view key, size_t count) {
  return {"XREVRANGE", std::string(key), "+", "-", "COUNT", std::to_string(count)};
}

}  // namespace ft::schema

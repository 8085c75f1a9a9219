#include "schema/streams.h"

#include <fmt/format.h>

#include <algorithm>

#include "proto/codec.h"
#include "proto/node_history_codec.h"

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

redis::Argv AppendNodeRecord(const proto::NodeRecord& record, int64_t history_len) {
  return {"XADD", proto::Keys::NodeHistory(record.node), "MAXLEN", "~", std::to_string(std::max<int64_t>(1, history_len)),
          "*", "kind", proto::NodeRecordKindName(record.kind), "json", proto::Encode(record)};
}

std::vector<redis::Argv> IndexNode(std::string_view node, int64_t at_unix_ms, int64_t ttl_ms) {
  return {{"PEXPIRE", proto::Keys::NodeHistory(node), std::to_string(std::max<int64_t>(1000, ttl_ms))},
          {"ZADD", proto::Keys::NodesIndex(), std::to_string(at_unix_ms), proto::SanitizeName(node)}};
}

std::vector<redis::Argv> TrimNodeIndex(int64_t max_nodes, int64_t ttl_ms) {
  return {{"ZREMRANGEBYRANK", proto::Keys::NodesIndex(), "0", std::to_string(-(std::max<int64_t>(1, max_nodes) + 1))},
          {"PEXPIRE", proto::Keys::NodesIndex(), std::to_string(std::max<int64_t>(1000, ttl_ms))}};
}

redis::Argv NewestIndexedNodes(int64_t count) {
  return {"ZREVRANGE", proto::Keys::NodesIndex(), "0", std::to_string(count > 0 ? count - 1 : -1)};
}

redis::Argv NodeIndexExists() { return {"EXISTS", proto::Keys::NodesIndex()}; }

redis::Argv PostNotice(const proto::Keys& keys, const proto::Notice& notice) {
  redis::Argv argv{"XADD", keys.Notify(), "MAXLEN", "~", kNoticesCap, "*"};
  for (std::string& f : proto::NoticeFields(notice)) argv.push_back(std::move(f));
  return argv;
}

Status Decode(const redis::StreamEntry& entry, proto::Notice* out) {
  return proto::ParseNotice(entry.Flat(), out);
}

redis::Argv SetCommandCursor(const proto::Keys& keys, std::string_view node, std::string_view id) {
  return {"SET", keys.CommandCursor(node), std::string(id)};
}

redis::Argv GetCommandCursor(const proto::Keys& keys, std::string_view node) {
  return {"GET", keys.CommandCursor(node)};
}

redis::Argv GetLegacyCommandCursor(const proto::Keys& keys, std::string_view node) {
  return {"GET", keys.LegacyCommandCursor(node)};
}

redis::Argv Length(std::string_view key) { return {"XLEN", std::string(key)}; }

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

Status DecodeNodeRecord(const redis::StreamEntry& entry, std::string_view node, proto::NodeRecord* out) {
  const std::string* json = entry.Get("json");
  const std::string* kind = entry.Get("kind");
  if (json == nullptr) return Status::Corrupt(fmt::format("history entry {}: no json field", entry.id));
  proto::NodeRecord r;
  Status s = proto::Decode(*json, &r);
  if (!s.ok()) return s.WithContext(fmt::format("history entry {}", entry.id));
  if (kind == nullptr || *kind != proto::NodeRecordKindName(r.kind)) {
    return Status::Corrupt(fmt::format("history entry {}: kind field '{}' does not match its record's '{}'", entry.id,
                                       kind ? kind->substr(0, 16) : "", proto::NodeRecordKindName(r.kind)));
  }
  if (proto::SanitizeName(r.node) != proto::SanitizeName(node)) {
    return Status::Corrupt(fmt::format("history entry {}: a record of node '{}' in the history of '{}'", entry.id,
                                       r.node.substr(0, 64), node));
  }
  *out = std::move(r);
  return Status::Ok();
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

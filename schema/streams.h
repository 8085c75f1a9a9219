// ft::schema streams: each of the job's Redis streams typed, in one place: the one maker of an
// entry (its key, its cap, its fields, its encoding) and the one reader of an entry back into
// its struct, for every writer and reader in the worker, the master and the CLI. Entries carry
// the record as `json` and a few of its fields beside it (kind, rank, id, result, suspects) for
// people reading the stream with redis-cli; a reader takes the record from `json` and refuses an
// entry whose side fields say otherwise (docs/redis-schema.md).
//
//   stream                 written by          with              read by
//   events                 worker (outbox)     AppendEvent       master window, `ftmaster status`
//   acks                   worker (outbox)     AppendAck         master action, CLI save/stacks
//   cmd:<node>             master, CLI         PostCommand       the node's worker
//   incidents              master (fenced)     IncidentFields    master metrics/history, page, CLI
//   node:{<n>}:history     master, CLI cordon  AppendNodeRecord  master (verify), page, `nodes`
//                          (and IndexNode / TrimNodeIndex: the nodes index ft:nodes beside it)
//
// Reading takes foreign bytes: an entry that does not decode is returned with why, never
// thrown away silently, and never stops the reader. Pure but for ReadStream's one round trip.
#ifndef FT_SCHEMA_STREAMS_H_
#define FT_SCHEMA_STREAMS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "proto/keys.h"
#include "proto/messages.h"
#include "proto/node_history.h"
#include "proto/notice.h"
#include "redis/store.h"
#include "redis/stream_reply.h"

namespace ft::schema {

// The makers: one XADD each, capped (MAXLEN ~) so that a stream nobody trims stays bounded.
redis::Argv AppendEvent(const proto::Keys& keys, const proto::Event& event);
redis::Argv AppendAck(const proto::Keys& keys, const proto::CommandAck& ack);
redis::Argv PostCommand(const proto::Keys& keys, std::string_view node, const proto::Command& command);
// An incident entry's fields: the master appends them behind its fence and gate
// (redis::GatedAppend), not with a plain XADD.
redis::Argv IncidentFields(const proto::Incident& incident);
inline constexpr const char* kIncidentsCap = "10000";
// A record of a node's history across jobs, kept to the newest `history_len`
// (FT_NODE_HISTORY_LEN); IndexNode beside it.
redis::Argv AppendNodeRecord(const proto::NodeRecord& record, int64_t history_len);
// After records of `node` were appended: its history expires `ttl_ms` after the newest, and
// the nodes index (ft:nodes) names it, by its sanitized name as its key does, at `at_unix_ms`.
// TrimNodeIndex after the nodes of one write: the index keeps the `max_nodes` newest, and
// expires with the newest history.
std::vector<redis::Argv> IndexNode(std::string_view node, int64_t at_unix_ms, int64_t ttl_ms);
std::vector<redis::Argv> TrimNodeIndex(int64_t max_nodes, int64_t ttl_ms);
// The nodes index's readers: the `count` newest nodes, newest first; whether it exists.
redis::Argv NewestIndexedNodes(int64_t count);
redis::Argv NodeIndexExists();

// A notice to every worker of the job (the notify stream, proto/notice.h), capped at
// kNoticesCap (workers need only the newest few).
redis::Argv PostNotice(const proto::Keys& keys, const proto::Notice& notice);
inline constexpr const char* kNoticesCap = "1000";

// A node's command cursor: the id of the last command its worker executed, persisted before its
// acks go out (a restarted worker resumes after it), and where a worker of the grouped layout
// kept it (read once by an upgraded worker, never written).
redis::Argv SetCommandCursor(const proto::Keys& keys, std::string_view node, std::string_view id);
redis::Argv GetCommandCursor(const proto::Keys& keys, std::string_view node);
redis::Argv GetLegacyCommandCursor(const proto::Keys& keys, std::string_view node);

// How many entries a stream holds (XLEN: 0 for none).
redis::Argv Length(std::string_view key);

// The readers of one entry: its json decoded, the side fields checked against it. Errors name
// the entry's id.
Status Decode(const redis::StreamEntry& entry, proto::Event* out);
Status Decode(const redis::StreamEntry& entry, proto::CommandAck* out);
Status Decode(const redis::StreamEntry& entry, proto::Command* out);
Status Decode(const redis::StreamEntry& entry, proto::Incident* out);
Status Decode(const redis::StreamEntry& entry, proto::Notice* out);  // proto::ParseNotice's rules
// A node history's entry must also belong to `node`, the history's (a record written into
// another node's history is refused).
Status DecodeNodeRecord(const redis::StreamEntry& entry, std::string_view node, proto::NodeRecord* out);

// Ranges to read, at most `count` entries each. After: the entries past `cursor` ("" for the
// first), oldest first. Between: from `first` up to `last` ("" for the newest), both included,
// oldest first. Newest: the newest, newest first.
redis::Argv After(std::string_view key, std::string_view cursor, size_t count);
redis::Argv Between(std::string_view key, std::string_view first, std::string_view last, size_t count);
redis::Argv Newest(std::string_view key, size_t count);

// One entry of a stream as its record, or why it is not one.
template <typename T>
struct Entry {
  std::string id;
  T value;                 // when ok()
  Status why;              // why the entry did not decode
  redis::StreamEntry raw;  // the entry as the stream holds it, kept when it did not decode

  bool ok() const { return why.ok(); }
  // Its raw json, for a log that quotes a bad entry.
  std::string_view RawJson() const {
    const std::string* json = raw.Get("json");
    return json ? std::string_view(*json) : std::string_view();
  }
};

// What one read of a stream gave.
template <typename T>
struct StreamRead {
  std::vector<Entry<T>> entries;  // in the reply's order, decoded or not
  size_t malformed = 0;           // items of the reply that were no stream entry at all
  std::string not_a_stream;       // the reply, shortened, when it was neither an array nor nil

  // The id of the reply's last entry ("" when none): a cursor moves past bad entries too.
  std::string last_id() const { return entries.empty() ? std::string() : entries.back().id; }
  size_t bad() const {
    size_t n = 0;
    for (const Entry<T>& e : entries) n += e.ok() ? 0 : 1;
    return n;
  }
};

// The entries of an XRANGE / XREVRANGE reply, or of one stream in an XREAD reply, as records.
template <typename T>
void DecodeStream(const redis::Reply& reply, StreamRead<T>* out) {
  if (!reply.is_array() && !reply.is_nil()) {
    out->not_a_stream = reply.DebugString().substr(0, 64);
    return;
  }
  std::vector<redis::StreamEntry> entries;
  out->malformed += redis::ParseStream(reply, &entries);
  for (redis::StreamEntry& e : entries) {
    Entry<T> entry;
    entry.id = e.id;
    entry.why = Decode(e, &entry.value);
    if (!entry.ok()) entry.raw = std::move(e);
    out->entries.push_back(std::move(entry));
  }
}

// One range read (After or Newest) and its decoding. Errors: only Redis's.
template <typename T>
Status ReadStream(redis::Commands& redis, const redis::Argv& range, StreamRead<T>* out) {
  redis::Reply reply;
  FT_RETURN_IF_ERROR(redis.Run(range, &reply));
  DecodeStream(reply, out);
  return Status::Ok();
}

}  // namespace ft::schema

#endif  // FT_SCHEMA_STREAMS_H_

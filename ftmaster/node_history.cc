#include "ftmaster/node_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "common/log.h"
#include "ftmaster/core/node_records.h"
#include "ftmaster/loop_util.h"
#include "proto/codec.h"
#include "proto/keys.h"
#include "proto/node_history_codec.h"
#include "schema/master_hash.h"
#include "schema/streams.h"

namespace ft::master {
namespace {

// What makes a record the same as one already written (core/lemon_score.h drops such repeats).
using Identity = std::tuple<std::string, std::string, proto::NodeRecordKind, std::string>;
Identity IdentityOf(const proto::NodeRecord& r) { return {r.job, r.incident, r.kind, r.detail}; }

// "NOPERM", "WRONGTYPE", "ERR": the kind of a refusal, logged once each.
std::string RefusalKind(const std::string& message) { return message.substr(0, message.find(' ')); }

}  // namespace


struct NodeHistoryRound::Pending {
  std::string last_id;                      // the last incident taken (the cursor once written)
  std::vector<proto::NodeRecord> records;
  bool more = false;                        // incidents wait after last_id
};

NodeHistoryRound::NodeHistoryRound(LoopContext* ctx) : ctx_(ctx) {}

void NodeHistoryRound::NewTerm(Clock::time_point now) {
  cursor_.clear();
  verify_ = true;
  next_ = now;
  backoff_ = std::chrono::milliseconds(0);
}

void NodeHistoryRound::LoadTerm(const MasterHash& state) {
  auto it = state.find(schema::master_hash::kHistoryCursor);
  if (it == state.end()) return;
  uint64_t ms = 0, seq = 0;
  if (ParseStreamId(it->second, &ms, &seq)) {
    cursor_ = it->second;
  } else {
    ctx_->bad.Report("master history_cursor", it->second,
                     Status::Corrupt("not a stream id; node histories are written again from the first incident "
                                     "(what they hold already is left out)"));
  }
}

void NodeHistoryRound::Failed(Clock::time_point now, const std::string& what) {
  verify_ = true;  // some records of the batch may be in
  backoff_ = std::min<std::chrono::milliseconds>(kMaxBackoff, std::max(kPeriod, 2 * backoff_));
  next_ = now + backoff_;
  if (!warned_) {
    FT_LOG(Warn, Master, "node history not written ({}); the job is not affected, retrying every {} s at most",
           what, kMaxBackoff.count() / 1000);
    warned_ = true;
  }
}

void NodeHistoryRound::Run(Clock::time_point now, int64_t unix_ms) {
  (void)unix_ms;
  next_ = now + kPeriod;
  Pending pending;
  if (!Collect(&pending)) return Failed(now, "reading the incidents failed");
  if (pending.last_id.empty()) return;  // nothing new
  if (verify_ && !pending.records.empty() && !LeaveOutWritten(&pending)) {
    return Failed(now, "reading the nodes' histories failed");
  }
  if (!Write(pending)) return Failed(now, "Redis failed while writing");
  if (!ctx_->writer.Run({schema::master_hash::Set(ctx_->keys, {{schema::master_hash::kHistoryCursor, pending.last_id}})})) {
    return Failed(now, "the cursor's write was refused");
  }
  cursor_ = pending.last_id;
  verify_ = false;
  backoff_ = std::chrono::milliseconds(0);
  if (warned_) {
    FT_LOG(Info, Master, "node history written again (up to incident entry {})", cursor_);
    warned_ = false;
  }
  // More waiting: at the next tick, not a period later.
  if (pending.more) next_ = now;
}

bool NodeHistoryRound::Collect(Pending* pending) {
  schema::StreamRead<proto::Incident> read;
  if (!schema::ReadStream(*ctx_->store, schema::After(ctx_->keys.Incidents(), cursor_, kBatch), &read).ok()) {
    return false;
  }
  if (read.malformed > 0) {
    ctx_->bad.Report(ctx_->keys.Incidents(), fmt::format("{} malformed entries after {}", read.malformed, cursor_),
                     Status::Corrupt("malformed stream entries: no node history from them"));
  }
  const size_t per_incident = static_cast<size_t>(std::max<int64_t>(1, ctx_->options.config.node_history_per_incident));
  for (const schema::Entry<proto::Incident>& e : read.entries) {
    if (!e.ok()) {
      ctx_->bad.Report(fmt::format("incident {}", e.id), e.RawJson(), e.why.WithContext("no node history from it"));
      pending->last_id = e.id;
      continue;
    }
    const proto::Incident& incident = e.value;
    IncidentRecords r = NodeRecordsOf(incident, ctx_->options.job, per_incident);
    if (!pending->records.empty() && pending->records.size() + r.records.size() > kMaxRecordsPerRun) {
      pending->more = true;
      return true;
    }
    if (r.nodes_left_out > 0) {
      FT_LOG(Info, Master, "incident {} named {} nodes: their history records it for {} of them (evicted, then with "
             "hardware signals, then suspects in order; FT_NODE_HISTORY_PER_INCIDENT), {} left out",
             incident.id, r.nodes_named, r.nodes_named - r.nodes_left_out, r.nodes_left_out);
    }
    pending->last_id = e.id;
    for (proto::NodeRecord& record : r.records) pending->records.push_back(std::move(record));
  }
  pending->more = read.entries.size() + read.malformed >= kBatch;
  return true;
}

bool NodeHistoryRound::LeaveOutWritten(Pending* pending) {
  std::vector<std::string> nodes;
  for (const proto::NodeRecord& r : pending->records) {
    if (std::find(nodes.begin(), nodes.end(), r.node) == nodes.end()) nodes.push_back(r.node);
  }
  std::vector<redis::Argv> reads;
  for (const std::string& node : nodes) {
    reads.push_back(schema::Newest(proto::Keys::NodeHistory(node), kVerifyDepth));
  }
  std::vector<redis::Reply> replies;
  if (!ctx_->store->PipelinePartial(reads, &replies).ok() || replies.size() != reads.size()) return false;
  std::map<std::string, std::set<Identity>> there;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (replies[i].is_error()) continue;  // unreadable (a WRONGTYPE): the write says so
    std::vector<StreamEntry> entries;
    ParseStream(replies[i], &entries);
    for (const StreamEntry& e : entries) {
      proto::NodeRecord r;
      if (schema::DecodeNodeRecord(e, nodes[i], &r).ok()) there[nodes[i]].insert(IdentityOf(r));
    }
  }
  const size_t before = pending->records.size();
  std::erase_if(pending->records, [&](const proto::NodeRecord& r) {
    auto it = there.find(r.node);
    return it != there.end() && it->second.count(IdentityOf(r)) > 0;
  });
  if (const size_t dropped = before - pending->records.size(); dropped > 0) {
    already_there_ += dropped;
    FT_LOG(Info, Master, "node history: {} record{} of incidents up to {} already written (by an earlier leader): "
           "not written again", dropped, dropped == 1 ? "" : "s", pending->last_id);
  }
  return true;
}

bool NodeHistoryRound::Write(const Pending& pending) {
  if (pending.records.empty()) return true;
  const Config& config = ctx_->options.config;
  const int64_t ttl_ms = ToMs(config.node_history_ttl);
  std::vector<redis::Argv> writes;
  std::map<std::string, int64_t> newest;  // per node, its newest record written here
  for (const proto::NodeRecord& r : pending.records) {
    writes.push_back(schema::AppendNodeRecord(r, config.node_history_len));
    int64_t& at = newest[r.node];
    at = std::max(at, r.unix_ms);
  }
  for (const auto& [node, at] : newest) {
    for (redis::Argv& w : schema::IndexNode(node, at, ttl_ms)) writes.push_back(std::move(w));
  }
  for (redis::Argv& w : schema::TrimNodeIndex(config.node_history_nodes, ttl_ms)) writes.push_back(std::move(w));
  std::vector<redis::Reply> replies;
  if (!ctx_->store->PipelinePartial(writes, &replies).ok()) return false;
  size_t refused = 0;
  for (size_t i = 0; i < replies.size() && i < writes.size(); ++i) {
    if (!replies[i].is_error()) continue;
    ++refused;
    const std::string kind = RefusalKind(replies[i].str());
    if (refusals_logged_.insert(writes[i][0] + " " + kind).second) {
      FT_LOG(Warn, Master, "node history: Redis refused {} on {}: {} (with an ACL, apply `ftmaster acl` again); such "
             "records are skipped, the job is not affected", writes[i][0], writes[i][1], replies[i].str().substr(0, 200));
    }
  }
  written_ += pending.records.size();
  FT_LOG(Debug, Master, "node history: {} records of {} nodes written up to incident entry {}{}", pending.records.size(),
         newest.size(), pending.last_id, refused ? fmt::format(" ({} commands refused)", refused) : "");
  return true;
}

}  // namespace ft::master

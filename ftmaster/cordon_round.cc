#include "ftmaster/cordon_round.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "common/log.h"
#include "proto/keys.h"
#include "proto/node_history_codec.h"
#include "schema/master_hash.h"
#include "schema/node_hashes.h"
#include "schema/node_sets.h"

namespace ft::master {

std::map<std::string, proto::CordonEntry> ParseCordons(const redis::Reply& reply, BadValues* bad, size_t* garbled) {
  std::map<std::string, proto::CordonEntry> out;
  size_t bad_count = 0;
  std::vector<schema::HashValue<proto::CordonEntry>> cordons;
  if (Status s = schema::DecodeCordons(reply, &cordons); !s.ok()) {
    ++bad_count;
    bad->Report(proto::Keys::Cordons(), reply.DebugString().substr(0, 64), s);
  }
  for (schema::HashValue<proto::CordonEntry>& c : cordons) {
    if (!c.ok()) {
      ++bad_count;
      bad->Report(proto::Keys::Cordons() + " " + c.field, c.raw, c.why.WithContext("the cordon is left out"));
      continue;
    }
    out.emplace(c.field, std::move(c.value));
  }
  if (garbled != nullptr) *garbled = bad_count;
  return out;
}

void CordonRound::Run(Clock::time_point now, int64_t unix_ms) {
  next_ = now + kPeriod;
  const proto::Keys& keys = ctx_->keys;
  std::vector<redis::Reply> replies;
  if (!ctx_->store->PipelinePartial({schema::GetCordons(), schema::GetEvicted(keys)}, &replies).ok() ||
      replies.size() != 2 || replies[0].is_error() || replies[1].is_error()) {
    if (!warned_) {
      const std::string why = replies.size() == 2 && replies[0].is_error() ? replies[0].str() : "Redis failed";
      FT_LOG(Warn, Master, "cordons not read ({}); the job's eviction list leaves them out until they can be "
             "(with an ACL, apply `ftmaster acl` again)", why.substr(0, 200));
      warned_ = true;
    }
    return;
  }
  warned_ = false;
  std::map<std::string, std::string> active;  // node -> its reason in the eviction list
  for (const auto& [node, c] : ParseCordons(replies[0], &ctx_->bad, nullptr)) {
    if (c.Active(unix_ms)) active[proto::SanitizeName(node)] = std::string(kCordonedWhy) + c.reason;
  }
  const std::set<std::string> evicted = schema::DecodeNodes(replies[1]);
  // Why each evicted node is there: only a cordon's entry is ours to take back.
  std::vector<std::string> evicted_list(evicted.begin(), evicted.end());
  std::map<std::string, std::string> why;
  if (!evicted_list.empty()) {
    std::vector<std::string> fields;
    for (const std::string& n : evicted_list) fields.push_back(schema::master_hash::EvictedWhy(n));
    redis::Reply reasons;
    if (!ctx_->store->Run(schema::master_hash::GetFields(keys, fields), &reasons).ok() || !reasons.is_array()) return;
    for (size_t i = 0; i < evicted_list.size() && i < reasons.size(); ++i) {
      if (reasons[i].is_string()) why[evicted_list[i]] = reasons[i].str();
    }
  }
  std::vector<redis::Argv> writes;
  std::vector<std::string> added, lifted;
  for (const auto& [node, reason] : active) {
    auto it = why.find(node);
    const bool ours = it != why.end() && it->second.rfind(kCordonedWhy, 0) == 0;
    if (evicted.count(node) && !(ours && it->second != reason)) continue;  // there (or evicted for its own reason)
    writes.push_back(schema::AddEvicted(keys, {node}));
    writes.push_back(schema::master_hash::Set(keys, {{schema::master_hash::EvictedWhy(node), reason}}));
    added.push_back(node);
  }
  for (const std::string& node : evicted) {
    auto it = why.find(node);
    if (it == why.end() || it->second.rfind(kCordonedWhy, 0) != 0 || active.count(node)) continue;
    writes.push_back(schema::RemoveEvicted(keys, node));
    writes.push_back(schema::master_hash::Delete(keys, {schema::master_hash::EvictedWhy(node)}));
    lifted.push_back(node);
  }
  if (writes.empty()) return;
  if (!ctx_->writer.Run(writes)) return;  // again at the next period
  for (const std::string& node : added) {
    FT_LOG(Info, Master, "node {} is in the job's eviction list: {}", node, active[node]);
  }
  for (const std::string& node : lifted) {
    FT_LOG(Info, Master, "node {} left the job's eviction list: its cordon was lifted or lapsed", node);
  }
}

}  // namespace ft::master

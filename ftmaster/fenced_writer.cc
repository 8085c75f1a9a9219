#include "ftmaster/fenced_writer.h"

#include "common/log.h"
#include "proto/codec.h"
#include "schema/master_hash.h"
#include "schema/node_sets.h"
#include "schema/streams.h"

namespace ft::master {

FencedWriter::FencedWriter(redis::Store* store, const proto::Keys* keys, std::string id,
                           uint64_t* fenced_out)
    : store_(store), keys_(keys), id_(std::move(id)), fenced_out_(fenced_out) {}

bool FencedWriter::Run(const std::vector<redis::Argv>& commands) {
  if (commands.empty()) return true;
  bool held = false;
  Status s = store_->FencedRun(redis::Fence{keys_->Leader(), id_}, commands, &held);
  if (!s.ok()) {
    FT_LOG(Warn, Master, "write to Redis failed: {}; retrying next round", s.message());
    return false;
  }
  if (!held) {
    ++*fenced_out_;
    FT_LOG(Warn, Master, "write refused: the lease {} is no longer this master's ('{}'); "
           "standing by", keys_->Leader(), id_);
    return false;
  }
  return true;
}

std::optional<std::vector<bool>> FencedWriter::WriteIncidents(
    const std::vector<proto::Incident>& incidents, int64_t unix_ms,
    const std::vector<std::string>& evict,
    const std::vector<std::pair<std::string, std::string>>& on_win,
    const std::vector<std::pair<std::string, std::string>>& always,
    const std::vector<std::string>& del) {
  redis::GatedAppend g;
  g.gate_hash = keys_->MasterState();
  g.gate_value = std::to_string(unix_ms);
  g.stream = keys_->Incidents();
  g.stream_cap = schema::kIncidentsCap;
  for (const proto::Incident& incident : incidents) {
    g.entries.push_back({schema::master_hash::Decided(incident.id), schema::IncidentFields(incident)});
  }
  if (!evict.empty()) {
    g.on_any_win.push_back(schema::AddEvicted(*keys_, std::vector<std::string>(evict.begin(), evict.end())));
  }
  for (const auto& [f, v] : on_win) g.on_any_win.push_back(schema::master_hash::Set(*keys_, {{f, v}}));
  for (const auto& [f, v] : always) g.always.push_back(schema::master_hash::Set(*keys_, {{f, v}}));
  for (const std::string& f : del) g.always.push_back(schema::master_hash::Delete(*keys_, {f}));
  std::vector<bool> won;
  bool held = false;
  Status s = store_->FencedGatedAppend(redis::Fence{keys_->Leader(), id_}, g, &won, &held);
  if (!s.ok()) {
    FT_LOG(Warn, Master, "writing incident {} failed: {}; retrying next round",
           incidents.empty() ? "" : incidents.front().id, s.message());
    return std::nullopt;
  }
  if (!held) {
    ++*fenced_out_;
    FT_LOG(Warn, Master, "incident write refused: the lease is no longer this master's; standing by");
    return std::nullopt;
  }
  won.resize(incidents.size(), false);
  return won;
}

}  // namespace ft::master

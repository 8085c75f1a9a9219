#include <fmt/format.h>

#include <cstdlib>

#include "common/log.h"
#include "ftmaster/loop_util.h"
#include "ftmaster/master_loop.h"
#include "proto/codec.h"

namespace ft::master {

// ---- the master loop: timeouts and stragglers, every summary_period -------------------------

void MasterLoop::SummaryRound(Clock::time_point now, int64_t unix_ms) {
  const auto start = Clock::now();
  redis::Reply reply;
  if (!store_->Run({"HGETALL", keys_.Summaries()}, &reply).ok()) return;
  summaries_.Load(reply, &bad_);
  if (now >= next_ranks_ && !ReadRanks(now)) return;
  for (const proto::RankSummary& s : summaries_.values()) {
    timeouts_.Add(s);
    stragglers_.Add(s);
  }
  if (timeouts_.Update(unix_ms)) unpublished_ = true;
  if (unpublished_) {
    const proto::TimeoutTable& table = timeouts_.table();
    if (writer_.Run({{"SET", keys_.Timeouts(), proto::Encode(table)},
                   {"SET", keys_.TimeoutsVersion(), std::to_string(table.version)}})) {
      unpublished_ = false;
      ++stats_.timeouts_published;
      FT_LOG(Info, Master, "timeouts version {}: default {:.0f} ms, {} entr{}", table.version,
             table.default_ms, table.entries.size(), table.entries.size() == 1 ? "y" : "ies");
    }
  }
  Stragglers(unix_ms);
  next_summary_ = now + Spacing(options_.summary_period, MsSince(start));
}

void MasterLoop::Stragglers(int64_t unix_ms) {
  std::vector<proto::Incident> incidents = stragglers_.Evaluate(unix_ms);
  const std::unordered_set<int>& named = stragglers_.named();
  std::vector<redis::Argv> ended;
  for (int rank : named_before_) {
    if (named.count(rank) || !straggler_fields_.count(rank)) continue;
    ended.push_back({"HDEL", keys_.MasterState(), fmt::format("straggler:{}", rank)});
    FT_LOG(Info, Master, "rank {} no longer straggles", rank);
  }
  // Episodes a previous master wrote: over once this master has seen enough summaries of the
  // rank without naming it again.
  if (!inherited_seen_.empty()) {
    for (const proto::RankSummary& s : summaries_.values()) {
      auto it = inherited_seen_.find(s.rank);
      if (it == inherited_seen_.end()) continue;
      int64_t& last = summary_ms_[s.rank];
      if (s.unix_ms > last) {
        last = s.unix_ms;
        ++it->second;
      }
      if (named.count(s.rank)) continue;
      if (it->second > StragglerOptions::FromConfig(options_.config).steps + 2) {
        ended.push_back({"HDEL", keys_.MasterState(), fmt::format("straggler:{}", s.rank)});
      }
    }
  }
  if (!ended.empty() && writer_.Run(ended)) {
    for (const redis::Argv& cmd : ended) {
      const int rank = std::atoi(cmd[2].c_str() + 10);
      straggler_fields_.erase(rank);
      inherited_seen_.erase(rank);
    }
  }
  for (int rank : named) {
    if (inherited_seen_.count(rank)) inherited_seen_.erase(rank);  // confirmed: ours now
  }
  named_before_ = named;
  for (proto::Incident& incident : incidents) {
    if (incident.suspects.empty()) continue;
    const int rank = incident.suspects.front().rank;
    if (straggler_fields_.count(rank)) continue;  // this episode was written already
    auto won = writer_.WriteIncidents({incident}, unix_ms, {}, {},
                              {{fmt::format("straggler:{}", rank), incident.id}}, {});
    if (!won) continue;
    straggler_fields_[rank] = incident.id;
    if ((*won)[0]) Print(incident, {});
  }
}

}  // namespace ft::master

#include <fmt/format.h>

#include <cstdlib>

#include "common/log.h"
#include "ftmaster/loop_util.h"
#include "ftmaster/master_loop.h"
#include "proto/codec.h"
#include "proto/notice.h"

namespace ft::master {

// ---- the master loop: timeouts and stragglers, every summary_period -------------------------

void MasterLoop::SummaryRound(Clock::time_point now, int64_t unix_ms) {
  const auto start = Clock::now();
  // The summaries in chunks (HSCAN), one per round, each spaced so that the pass takes about
  // 1/kSteadyShare of the master's time (the term's first pass, before any timeouts are
  // published, 1/3): 131k summaries are ~150 MB, and a single HGETALL of them would hold the
  // loop (and the lease) for seconds.
  const double share = summary_passes_ == 0 ? 3 : kSteadyShare;
  // The summaries are spread over the job's groups (proto/keys.h): a pass scans group 0 to
  // the last; a round goes on into the next group while it has read less than a chunk, so a
  // small job's pass still takes one round.
  if (summary_cursor_.empty()) {
    summaries_.BeginPass();
    summary_group_ = 0;
  }
  std::string cursor = summary_cursor_.empty() ? std::string(1, '0') : summary_cursor_;
  size_t read = 0;
  while (true) {
    const std::string key = keys_.Summaries(summary_group_);
    redis::Reply reply;
    if (!store_->Run({"HSCAN", key, cursor, "COUNT", kSummaryChunk}, &reply).ok()) {
      summary_cursor_ = cursor;  // this group's scan goes on at the next round
      return;
    }
    if (!reply.is_array() || reply.size() != 2 || !reply[0].is_string()) {
      bad_.Report(key, reply.DebugString().substr(0, 64),
                  Status::Corrupt("not an HSCAN reply (wrong key type?)"));
      summary_cursor_.clear();
      next_summary_ = now + options_.summary_period;
      return;
    }
    summaries_.LoadPairs(reply[1], &bad_);
    read += reply[1].size() / 2;
    // Into the models as they come (they keep each rank's newest): no pass end that walks all.
    for (const proto::RankSummary* s : summaries_.ChangedValues()) {
      timeouts_.Add(*s);
      stragglers_.Add(*s);
    }
    if (reply[0].str() != "0") {
      cursor = reply[0].str();
    } else if (summary_group_ + 1 < proto::Keys::kGroups) {
      ++summary_group_;
      cursor.assign(1, '0');  // (not = "0": GCC 12 misreads it, -Wrestrict)
    } else {
      break;  // the pass is complete
    }
    if (read >= static_cast<size_t>(std::atoi(kSummaryChunk))) {
      summary_cursor_ = cursor;
      next_summary_ = now + Spacing(options_.tick, MsSince(start), share);
      return;
    }
  }
  summary_cursor_.clear();
  summaries_.EndPass();
  ++summary_passes_;
  if (timeouts_.Update(unix_ms)) unpublished_ = true;
  if (unpublished_) {
    const proto::TimeoutTable& table = timeouts_.table();
    if (writer_.Run({{"SET", keys_.Timeouts(), proto::Encode(table)},
                     {"SET", keys_.TimeoutsVersion(), std::to_string(table.version)},
                     proto::NoticeXadd(keys_.Notify(), proto::NoticeOf(proto::NoticeKind::kTimeouts))})) {
      unpublished_ = false;
      ++stats_.timeouts_published;
      FT_LOG(Info, Master, "timeouts version {}: default {:.0f} ms, {} entr{}", table.version,
             table.default_ms, table.entries.size(), table.entries.size() == 1 ? "y" : "ies");
    }
  }
  Stragglers(unix_ms);
  next_summary_ = now + Spacing(options_.summary_period, MsSince(start), share);
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

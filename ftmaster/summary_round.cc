#include "ftmaster/summary_round.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "common/log.h"
#include "ftmaster/loop_util.h"
#include "proto/codec.h"
#include "proto/notice.h"

namespace ft::master {

SummaryRound::SummaryRound(LoopContext* ctx)
    : ctx_(ctx),
      timeouts_(TimeoutOptions::FromConfig(ctx->options.config)),
      stragglers_(StragglerOptions::FromConfig(ctx->options.config)) {}

void SummaryRound::NewTerm(Clock::time_point now) {
  cursor_.clear();
  passes_ = 0;
  summaries_.Clear();
  timeouts_ = TimeoutModel(TimeoutOptions::FromConfig(ctx_->options.config));
  unpublished_ = false;
  stragglers_ = StragglerDetector(StragglerOptions::FromConfig(ctx_->options.config));
  named_before_.clear();
  straggler_fields_.clear();
  inherited_seen_.clear();
  summary_ms_.clear();
  next_round_ = now;
}

void SummaryRound::LoadTerm(const MasterHash& state) {
  for (const auto& [field, value] : state) {
    if (field.rfind("straggler:", 0) != 0) continue;
    int rank = -1;
    if (std::sscanf(field.c_str() + 10, "%d", &rank) == 1 && rank >= 0) {
      straggler_fields_[rank] = value;
      inherited_seen_[rank] = 0;
    }
  }
}

bool SummaryRound::LoadTimeouts() {
  redis::Reply table, version;
  if (!ctx_->store->Run({"GET", ctx_->keys.Timeouts()}, &table).ok()) return false;
  if (!ctx_->store->Run({"GET", ctx_->keys.TimeoutsVersion()}, &version).ok()) return false;
  if (table.is_string()) {
    proto::TimeoutTable t;
    Status s = proto::Decode(table.str(), &t);
    if (s.ok()) {
      timeouts_.Restore(t);
    } else {
      ctx_->bad.Report("timeouts table", table.str(), s);
    }
  }
  int64_t published_version = 0;
  if (version.ToInt(&published_version) && published_version > 0 &&
      static_cast<uint64_t>(published_version) > timeouts_.table().version) {
    // The table is unreadable (or behind): continue the numbering so workers see a change.
    proto::TimeoutTable t;
    t.version = static_cast<uint64_t>(published_version);
    timeouts_.Restore(t);
  }
  return true;
}

// ---- every summary_period ------------------------------------------------------------------

void SummaryRound::Run(Clock::time_point now, int64_t unix_ms) {
  const auto start = Clock::now();
  // The summaries in chunks (HSCAN), one per round, each spaced so that the pass takes about
  // 1/kSteadyShare of the master's time (the term's first pass, before any timeouts are
  // published, 1/3): 131k summaries are ~150 MB, and a single HGETALL of them would hold the
  // loop (and the lease) for seconds.
  const double share = passes_ == 0 ? 3 : kSteadyShare;
  // The summaries are spread over the job's groups (proto/keys.h): a pass scans group 0 to
  // the last; a round goes on into the next group while it has read less than a chunk, so a
  // small job's pass still takes one round.
  if (cursor_.empty()) {
    summaries_.BeginPass();
    group_ = 0;
  }
  std::string cursor = cursor_.empty() ? std::string(1, '0') : cursor_;
  size_t read = 0;
  while (true) {
    const std::string key = ctx_->keys.Summaries(group_);
    redis::Reply reply;
    if (!ctx_->store->Run({"HSCAN", key, cursor, "COUNT", kSummaryChunk}, &reply).ok()) {
      cursor_ = cursor;  // this group's scan goes on at the next round
      return;
    }
    if (!reply.is_array() || reply.size() != 2 || !reply[0].is_string()) {
      ctx_->bad.Report(key, reply.DebugString().substr(0, 64),
                  Status::Corrupt("not an HSCAN reply (wrong key type?)"));
      cursor_.clear();
      next_round_ = now + ctx_->options.summary_period;
      return;
    }
    summaries_.LoadPairs(reply[1], &ctx_->bad);
    read += reply[1].size() / 2;
    // Into the models as they come (they keep each rank's newest): no pass end that walks all.
    for (const proto::RankSummary* s : summaries_.ChangedValues()) {
      timeouts_.Add(*s);
      stragglers_.Add(*s);
    }
    if (reply[0].str() != "0") {
      cursor = reply[0].str();
    } else if (group_ + 1 < proto::Keys::kGroups) {
      ++group_;
      cursor.assign(1, '0');  // (not = "0": GCC 12 misreads it, -Wrestrict)
    } else {
      break;  // the pass is complete
    }
    if (read >= static_cast<size_t>(std::atoi(kSummaryChunk))) {
      cursor_ = cursor;
      next_round_ = now + Spacing(ctx_->options.tick, MsSince(start), share);
      return;
    }
  }
  cursor_.clear();
  summaries_.EndPass();
  ++passes_;
  if (timeouts_.Update(unix_ms)) unpublished_ = true;
  if (unpublished_) {
    const proto::TimeoutTable& table = timeouts_.table();
    if (ctx_->writer.Run({{"SET", ctx_->keys.Timeouts(), proto::Encode(table)},
                     {"SET", ctx_->keys.TimeoutsVersion(), std::to_string(table.version)},
                     proto::NoticeXadd(ctx_->keys.Notify(), proto::NoticeOf(proto::NoticeKind::kTimeouts))})) {
      unpublished_ = false;
      ++ctx_->stats.timeouts_published;
      FT_LOG(Info, Master, "timeouts version {}: default {:.0f} ms, {} entr{}", table.version,
             table.default_ms, table.entries.size(), table.entries.size() == 1 ? "y" : "ies");
    }
  }
  Stragglers(unix_ms);
  next_round_ = now + Spacing(ctx_->options.summary_period, MsSince(start), share);
}

void SummaryRound::Stragglers(int64_t unix_ms) {
  std::vector<proto::Incident> incidents = stragglers_.Evaluate(unix_ms);
  const std::unordered_set<int>& named = stragglers_.named();
  std::vector<redis::Argv> ended;
  for (int rank : named_before_) {
    if (named.count(rank) || !straggler_fields_.count(rank)) continue;
    ended.push_back({"HDEL", ctx_->keys.MasterState(), fmt::format("straggler:{}", rank)});
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
      if (it->second > StragglerOptions::FromConfig(ctx_->options.config).steps + 2) {
        ended.push_back({"HDEL", ctx_->keys.MasterState(), fmt::format("straggler:{}", s.rank)});
      }
    }
  }
  if (!ended.empty() && ctx_->writer.Run(ended)) {
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
    auto won = ctx_->writer.WriteIncidents({incident}, unix_ms, {}, {},
                              {{fmt::format("straggler:{}", rank), incident.id}}, {});
    if (!won) continue;
    straggler_fields_[rank] = incident.id;
    if ((*won)[0]) ctx_->Print(incident, {});
  }
}

}  // namespace ft::master

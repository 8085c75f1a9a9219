// master_bench: the synthetic workers' write schedule; see worker_driver.h.
#include "bench/master_bench/worker_driver.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "ftmaster/store.h"
#include "proto/notice.h"

namespace ft::bench {

void Pipeline(redis::Commands& db, const std::vector<redis::Argv>& commands,
              std::string_view what) {
  if (commands.empty()) return;
  std::vector<redis::Reply> replies;
  Check(db.PipelinePartial(commands, &replies), what);
  if (replies.size() != commands.size()) {
    Die(fmt::format("{}: {} replies to {} commands", what, replies.size(), commands.size()));
  }
  for (const redis::Reply& r : replies) {
    if (r.is_error()) Die(fmt::format("{}: Redis answered {}", what, r.str()));
  }
}

Driver::Driver(SyntheticJob* job, redis::Commands* db, int64_t now, bool every_report)
    : job_(job), db_(db), every_report_(every_report) {
  const int nodes = job->nodes();
  const auto n = static_cast<size_t>(nodes);
  next_report_.resize(n);
  next_refresh_.resize(n);
  next_summary_.resize(n);
  next_heartbeat_.resize(n);
  hung_written_.assign(n, 0);
  attentive_written_.assign(n * kTp, 0);
  const int64_t summary_period = every_report ? kSummaryPeriodMs : kSummaryRefreshMs;
  for (int i = 0; i < nodes; ++i) {
    const auto k = static_cast<size_t>(i);
    next_report_[k] = now + kProgressPeriodMs * i / nodes;
    next_refresh_[k] = now + kProgressRefreshMs * i / nodes;
    next_summary_[k] = now + summary_period * i / nodes;
    next_heartbeat_[k] = now + kHeartbeatPeriodMs * i / nodes;
  }
}

void Driver::WriteAll(int64_t now) {
  std::vector<redis::Argv> cmds;
  for (int i = 0; i < job_->nodes(); ++i) {
    job_->ProgressCommand(i, now, hung_, &cmds);
    job_->SummaryCommand(i, now, hung_, &cmds);
    job_->HeartbeatCommands(i, now, &cmds);
    if (cmds.size() >= kMaxTickCommands) {
      Pipeline(*db_, cmds, "writing the synthetic workers' state");
      cmds.clear();
    }
  }
  Pipeline(*db_, cmds, "writing the synthetic workers' state");
}

void Driver::Watch(int rank) {
  watch_rank_ = rank;
  watched_.clear();
}

void Driver::ReadNotices() {
  redis::Reply reply;
  Check(db_->Run({"XRANGE", job_->keys().Notify(), "(" + notify_cursor_, "+", "COUNT", "100"},
                 &reply),
        "reading the notify stream");
  std::vector<master::StreamEntry> entries;
  master::ParseStream(reply, &entries);
  for (const master::StreamEntry& e : entries) {
    notify_cursor_ = e.id;
    std::vector<std::string> fields;
    for (const auto& [f, v] : e.fields) {
      fields.push_back(f);
      fields.push_back(v);
    }
    proto::Notice notice;
    if (!proto::ParseNotice(fields, &notice).ok() || notice.kind != proto::NoticeKind::kWindow) {
      continue;
    }
    if (notice.open && !window_open_) ++windows_opened_;
    // A worker answers a window that asks for new tables at once (its next tick), not at its
    // next report: the named ranks' tables, or every node's.
    const bool asks = notice.open && (!window_open_ || !(notice.ranks == window_ranks_));
    window_open_ = notice.open;
    window_ranks_ = notice.ranks;
    if (asks) answer_window_ = true;
  }
}

void Driver::NodeReport(int node, int64_t now, std::vector<redis::Argv>* cmds) {
  const auto k = static_cast<size_t>(node);
  const bool window_all = window_open_ && !window_ranks_;
  if (every_report_ || window_all || now >= next_refresh_[k] || (hung_ && !hung_written_[k])) {
    job_->ProgressCommand(node, now, hung_, cmds);
    hung_written_[k] = hung_;
    next_refresh_[k] = now + kProgressRefreshMs;
    return;
  }
  for (int r = node * kTp; r < (node + 1) * kTp; ++r) {
    const bool asked = window_open_ && window_ranks_->Contains(r);
    char& attentive = attentive_written_[static_cast<size_t>(r)];
    const bool turned = hung_ && !attentive && job_->Attentive(r, now);
    if (turned) attentive = 1;
    if (asked || turned) job_->RankProgressCommand(r, now, hung_, cmds);
  }
}

void Driver::Tick(int64_t now) {
  if (!every_report_) ReadNotices();
  std::vector<redis::Argv> cmds;
  const int nodes = job_->nodes();
  bool watched = false;
  if (answer_window_) {
    answer_window_ = false;
    if (!window_ranks_) {
      std::fill(next_report_.begin(), next_report_.end(), now);
    } else {
      for (int r = 0; r < nodes * kTp; ++r) {
        if (!window_ranks_->Contains(r)) continue;
        job_->RankProgressCommand(r, now, hung_, &cmds);
        watched = watched || r == watch_rank_;
      }
    }
  }
  for (int visited = 0; visited < nodes && cmds.size() < kMaxTickCommands; ++visited) {
    const int i = cursor_;
    cursor_ = cursor_ + 1 == nodes ? 0 : cursor_ + 1;
    const auto k = static_cast<size_t>(i);
    if (now >= next_report_[k]) {
      const size_t before = cmds.size();
      NodeReport(i, now, &cmds);
      next_report_[k] = std::max(next_report_[k] + kProgressPeriodMs, now);
      if (watch_rank_ >= 0 && watch_rank_ / kTp == i) {
        for (size_t c = before; c < cmds.size(); ++c) {
          watched = watched || cmds[c][2] == std::to_string(watch_rank_);
        }
      }
    }
    if (now >= next_summary_[k]) {
      job_->SummaryCommand(i, now, hung_, &cmds);
      const int64_t period = every_report_ ? kSummaryPeriodMs : kSummaryRefreshMs;
      next_summary_[k] = std::max(next_summary_[k] + period, now);
    }
    if (now >= next_heartbeat_[k]) {
      job_->HeartbeatCommands(i, now, &cmds);
      next_heartbeat_[k] = std::max(next_heartbeat_[k] + kHeartbeatPeriodMs, now);
    }
  }
  const auto start = Clock::now();
  Pipeline(*db_, cmds, "writing the synthetic workers' state");
  max_write_ms_ = std::max(max_write_ms_, MsSince(start));
  if (watched) watched_.push_back({now, UnixMs()});
}

void Pace(Clock::time_point* next) {
  *next += Ms(kDriverTickMs);
  const auto now = Clock::now();
  if (*next < now) *next = now;
  std::this_thread::sleep_until(*next);
}

}  // namespace ft::bench

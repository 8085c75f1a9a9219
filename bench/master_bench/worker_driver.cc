// master_bench: the synthetic workers' write schedule; see worker_driver.h.
#include "bench/master_bench/worker_driver.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

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

Driver::Driver(SyntheticJob* job, redis::Commands* db, int64_t now) : job_(job), db_(db) {
  const int nodes = job->nodes();
  next_progress_.resize(static_cast<size_t>(nodes));
  next_summary_.resize(static_cast<size_t>(nodes));
  for (int i = 0; i < nodes; ++i) {
    next_progress_[static_cast<size_t>(i)] = now + kProgressPeriodMs * i / nodes;
    next_summary_[static_cast<size_t>(i)] = now + kSummaryPeriodMs * i / nodes;
  }
}

void Driver::WriteAll(int64_t now) {
  std::vector<redis::Argv> cmds;
  for (int i = 0; i < job_->nodes(); ++i) {
    job_->ProgressCommand(i, now, hung_, &cmds);
    job_->SummaryCommand(i, now, hung_, &cmds);
    job_->HeartbeatCommands(i, now, &cmds);
  }
  Pipeline(*db_, cmds, "writing the synthetic workers' state");
}

void Driver::Watch(int rank) {
  watch_node_ = rank / kTp;
  watched_.clear();
}

void Driver::Tick(int64_t now) {
  std::vector<redis::Argv> cmds;
  bool watched = false;
  for (int i = 0; i < job_->nodes(); ++i) {
    int64_t& progress = next_progress_[static_cast<size_t>(i)];
    if (now >= progress) {
      job_->ProgressCommand(i, now, hung_, &cmds);
      progress = std::max(progress + kProgressPeriodMs, now);
      watched = watched || i == watch_node_;
    }
    int64_t& summary = next_summary_[static_cast<size_t>(i)];
    if (now >= summary) {
      job_->SummaryCommand(i, now, hung_, &cmds);
      job_->HeartbeatCommands(i, now, &cmds);
      summary = std::max(summary + kSummaryPeriodMs, now);
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

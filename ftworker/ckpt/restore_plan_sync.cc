#include "ftworker/ckpt/restore_plan_sync.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "jitckpt/arena.h"
#include "jitckpt/manifest.h"
#include "schema/published.h"

namespace ft::worker {

namespace {

std::string Absolute(const std::string& dir) {
  if (dir.empty()) return dir;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  return ec ? dir : p.lexically_normal().string();
}

}  // namespace

ckpt::NodePlan ToNodePlan(const proto::RestorePlan& plan, const RestorePlanSyncOptions& options) {
  ckpt::NodePlan out;
  out.job = options.job;
  out.node = proto::SanitizeName(options.node);
  out.version = plan.version;
  out.step = plan.step < 0 ? -1 : plan.step;
  out.settling = plan.settling;
  // The ranks may run in another working directory: the file names absolute paths.
  out.arena_dir = Absolute(options.arena_dir);
  out.local_dir = Absolute(options.local_dir);
  out.remote_dir = Absolute(options.remote_dir);
  if (out.step < 0) return out;  // nothing to restore: no sources either
  for (const proto::RestoreRank& rank : plan.ranks) {
    ckpt::PlanRank r;
    r.rank = rank.rank;
    r.digest = rank.digest;
    for (const proto::RestoreSource& source : rank.sources) {
      r.sources.push_back(ckpt::PlanSource{source.rank, proto::SanitizeName(source.node), source.tiers});
    }
    out.ranks.push_back(std::move(r));
  }
  std::sort(out.ranks.begin(), out.ranks.end(),
            [](const ckpt::PlanRank& a, const ckpt::PlanRank& b) { return a.rank < b.rank; });
  return out;
}

RestorePlanSync::RestorePlanSync(RestorePlanSyncOptions options)
    : options_(std::move(options)),
      keys_(options_.job),
      path_(ckpt::NodePlanPath(options_.arena_dir, options_.job, options_.node)) {}

void RestorePlanSync::NoteRankEnded(int rank, const std::string& how, uint64_t mono_ns, int64_t end_unix_ms) {
  none_why_ = fmt::format("rank {} of this node ended ({}) less than {} ms ago: its copies may still reach the "
                          "master", rank, how, options_.settle_for_ns / 1'000'000);
  none_until_ns_ = mono_ns + options_.settle_for_ns;
  if (end_unix_ms > plan_echo_ms_ && end_unix_ms >= end_unix_ms_) {
    end_unix_ms_ = end_unix_ms;
    end_why_ = fmt::format("rank {} of this node ended ({}); the master has not yet read the copies it saved on "
                           "its way out (waited for at most {} ms)", rank, how, options_.end_wait_for_ns / 1'000'000);
    end_until_ns_ = mono_ns + options_.end_wait_for_ns;
  }
  FT_LOG(Info, Worker, "rank {} ended ({}): the restore plan file {} says settling until the master has heard of "
         "it", rank, how, path_);
  if (have_plan_ && !withholding_) WriteCurrent(plan_version_);
}

void RestorePlanSync::NoteUnplannedCopies(uint64_t mono_ns) {
  std::string held;
  int copies = 0;
  for (const std::string& path : ckpt::Arena::List(options_.arena_dir, options_.job)) {
    ckpt::Arena arena;
    ckpt::Manifest m;
    uint64_t generation = 0;
    if (!ckpt::Arena::OpenForRead(path, &arena).ok() || !arena.ReadCommitted(&m, &generation).ok()) continue;
    if (++copies <= 4) held += fmt::format("{}rank {} step {}", held.empty() ? "" : ", ", ckpt::Arena::RankOf(path), m.step);
  }
  if (copies == 0) return;
  none_why_ = fmt::format("this node's arenas hold copies of the job's ranks ({}{}) and Redis has no restore plan "
                          "(it restarted empty or was flushed, or the master has not judged them yet); waiting "
                          "for the master's plan (at most {} ms)",
                          held, copies > 4 ? fmt::format(" and {} more", copies - 4) : "",
                          options_.end_wait_for_ns / 1'000'000);
  none_until_ns_ = mono_ns + options_.end_wait_for_ns;
  FT_LOG(Info, Worker, "restore plan: {}", none_why_);
}

std::string RestorePlanSync::local_settling() const { return !end_why_.empty() ? end_why_ : none_why_; }

void RestorePlanSync::Poll(uint64_t mono_ns, redis::Commands& redis) {
  if (claiming_ && !lock_.held()) Claim();
  bool rewrite = false;
  if (!none_why_.empty() && mono_ns >= none_until_ns_) {
    none_why_.clear();
    rewrite = true;
  }
  if (!lost_why_.empty() && mono_ns >= lost_until_ns_) {
    FT_LOG(Warn, Worker, "the master published no restore plan within {} ms of Redis losing it: the restore plan "
           "file {} keeps plan version {} (step {}) as it is", options_.end_wait_for_ns / 1'000'000, path_,
           plan_version_, plan_.step < 0 ? std::string("none") : std::to_string(plan_.step));
    lost_why_.clear();
    rewrite = true;
  }
  if (!end_why_.empty() && mono_ns >= end_until_ns_) {
    FT_LOG(Warn, Worker, "the master did not say within {} ms that it heard of the end of this node's rank ({}): "
           "the restore plan file {} takes its plan as it is", options_.end_wait_for_ns / 1'000'000, end_why_, path_);
    end_why_.clear();
    rewrite = true;
  }
  if (rewrite && have_plan_ && !withholding_) WriteCurrent(plan_version_);
  if (mono_ns < next_poll_ns_) return;
  redis::Reply version;
  if (!redis.Run(schema::GetPlanVersion(keys_), &version).ok()) return;  // retried next tick
  next_poll_ns_ = mono_ns + (stretched_poll_ns_ != 0 ? stretched_poll_ns_ : options_.poll_interval_ns);
  const std::string current = version.is_string() ? version.str() : "";
  if (have_version_ && current == version_) return;
  if (current.empty() && have_plan_) {
    // The master never removes its plan: Redis lost it (restarted empty, flushed). The plan in
    // hand stays, settling, until the master publishes again — `step none` now would start a
    // relaunch from scratch over the copies this plan names.
    if (!plan_lost_) {
      plan_lost_ = true;
      lost_why_ = fmt::format("Redis no longer holds the master's restore plan (it restarted empty or was flushed): "
                              "this node keeps plan version {} until the master publishes again (at most {} ms)",
                              plan_version_, options_.end_wait_for_ns / 1'000'000);
      lost_until_ns_ = mono_ns + options_.end_wait_for_ns;
      FT_LOG(Warn, Worker, "restore plan: {}", lost_why_);
      if (!withholding_) WriteCurrent(plan_version_);
    }
    return;
  }
  plan_lost_ = false;
  lost_why_.clear();

  if (current.empty() && !have_plan_) NoteUnplannedCopies(mono_ns);
  proto::RestorePlan plan;  // default: step -1, version 0 — `step none`
  if (!current.empty()) {
    redis::Reply value;
    if (!redis.Run(schema::GetPlan(keys_), &value).ok()) return;
    if (value.is_string()) {
      Status s = proto::Decode(value.str(), &plan);
      if (!s.ok()) {
        FT_LOG(Warn, Worker, "the master's restore plan (version {}) in {} is unreadable: {}; "
               "keeping the plan file {} as it is until the master publishes another",
               current, keys_.Restore(), s.message(), path_);
        have_version_ = true;  // logged once: the same bad value is not read again
        version_ = current;
        return;
      }
    }
  }
  plan_ = ToNodePlan(plan, options_);
  plan_version_ = current;
  auto echo = plan.ends_seen.find(options_.node);
  plan_echo_ms_ = echo == plan.ends_seen.end() ? 0 : echo->second;
  if (!end_why_.empty() && plan_echo_ms_ >= end_unix_ms_) {
    FT_LOG(Info, Worker, "restore plan version {} is built on the copies of this node's ranks that ended",
           current);
    end_why_.clear();
  }
  have_plan_ = true;
  if (gate_ != nullptr) gate_->OnPlan(plan, redis);
  WriteCurrent(current);
}

void RestorePlanSync::Refresh() {
  if (gate_ == nullptr || !have_plan_ || gate_->generation() == gate_generation_) return;
  WriteCurrent(plan_version_);
}

void RestorePlanSync::WriteCurrent(const std::string& version) {
  ckpt::NodePlan shaped = plan_;
  // A plan naming a step is held only until the master echoes the end (about a round): long
  // holds there would make other nodes' restored ranks wait on these ranks, a hang to the
  // master. Over `step none` the peers' teardown copies get their while too.
  if (shaped.settling.empty()) {
    shaped.settling = !end_why_.empty() ? end_why_ : !lost_why_.empty() ? lost_why_ : shaped.step < 0 ? none_why_ : "";
  }
  if (gate_ != nullptr) {
    gate_generation_ = gate_->generation();
    if (!gate_->Shape(&shaped)) {
      Withhold(shaped, version);
      return;
    }
  }
  withholding_ = false;
  Write(shaped, version);
}

void RestorePlanSync::Withhold(const ckpt::NodePlan& plan, const std::string& version) {
  // A file from before (an older plan, a worker that died) would send a rank that starts now
  // to a source the gate is about to replace: none is better, ft_restore waits for it.
  if (::unlink(path_.c_str()) == 0) {
    FT_LOG(Info, Worker, "removed the restore plan file {} while this node's copies are prefetched", path_);
  } else if (errno != ENOENT) {
    FT_LOG(Warn, Worker, "could not remove the restore plan file {}: {}; ranks starting now may read an "
           "outdated plan", path_, std::strerror(errno));
  }
  if (!withholding_ || version != version_) {
    FT_LOG(Info, Worker, "restore plan version {} (step {}) withheld from this node's ranks until the "
           "prefetch of their copies ends; ft_restore waits for it (FT_RESTORE_WAIT)",
           plan.version, plan.step);
  }
  withholding_ = true;
  have_version_ = true;
  version_ = version;
}

void RestorePlanSync::Claim() {
  claiming_ = true;
  if (lock_.held()) return;
  Status s = lock_.Claim(path_, /*remove_plan=*/files_written_ == 0);
  if (s.ok()) {
    FT_LOG(Info, Worker, "holding {} while this worker runs: ranks trust the plan file {} only while it is held",
           ckpt::NodePlanLockPath(path_), path_);
    return;
  }
  if (!claim_logged_) {
    FT_LOG(Warn, Worker, "cannot take the restore plan lock yet: {}; trying again", s.message());
    claim_logged_ = true;
  }
}

void RestorePlanSync::RemoveFile() {
  if (files_written_ == 0) {  // not ours: another worker may have written it
    lock_.Release();
    return;
  }
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    FT_LOG(Warn, Worker, "could not remove the restore plan file {}: {}; ranks started before the "
           "next worker runs may read it", path_, std::strerror(errno));
  }
  lock_.Release();
  have_version_ = false;
}

void RestorePlanSync::Write(const ckpt::NodePlan& plan, const std::string& version) {
  Status s = ckpt::WriteNodePlan(path_, plan);
  if (s.code() == StatusCode::kInvalidArgument) {
    // A plan the file format refuses: writing it again will not help.
    FT_LOG(Warn, Worker, "the master's restore plan{} cannot be handed to this node's ranks: {}; "
           "keeping the plan file {} as it is until the master publishes another",
           version.empty() ? "" : " (version " + version + ")", s.message(), path_);
    have_version_ = true;
    version_ = version;
    return;
  }
  if (!s.ok()) {
    if (!write_failing_) {
      FT_LOG(Warn, Worker, "could not write the restore plan file {}: {}; ft_restore on this node "
             "waits for it (FT_RESTORE_WAIT). Check that FT_CKPT_ARENA_DIR is writable; retrying "
             "every poll", path_, s.message());
    }
    write_failing_ = true;
    return;  // have_version_ stays as it was: the next poll tries again
  }
  write_failing_ = false;
  have_version_ = true;
  version_ = version;
  ++files_written_;
  if (!plan.settling.empty()) {
    FT_LOG(Info, Worker, "restore plan{} (step {}) written to {} as settling: {}",
           version.empty() ? "" : " version " + version, plan.step < 0 ? std::string("none") : std::to_string(plan.step),
           path_, plan.settling);
  } else if (plan.step < 0) {
    FT_LOG(Info, Worker, "restore plan{}: no verified checkpoint (step none) written to {}",
           version.empty() ? "" : " version " + version, path_);
  } else {
    FT_LOG(Info, Worker, "restore plan version {}: step {} for {} rank(s) written to {}",
           plan.version, plan.step, plan.ranks.size(), path_);
  }
}

}  // namespace ft::worker

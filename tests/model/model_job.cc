#include "tests/model/model_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "jitckpt/node_plan.h"

namespace ft::model {
namespace {

constexpr int64_t kRestoreWaitMs = 10000;  // FT_RESTORE_WAIT's default (common/config_table.def)

std::string SavedMessage(const SlotCopy& c, int64_t ms) {
  return fmt::format("saved step={} digest={:016x} torn={} bytes=4096 ms={}", c.step, c.digest, c.torn ? 1 : 0, ms);
}

}  // namespace

ModelJob::ModelJob(const Draw& draw, std::mt19937_64* rng, Trace trace)
    : draw_(draw), rng_(rng), trace_(std::move(trace)) {
  ranks_.resize(static_cast<size_t>(draw.world()));
  arenas_.resize(static_cast<size_t>(draw.world()));
}

int64_t ModelJob::Jitter(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(*rng_); }

bool ModelJob::any_alive() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.alive; });
}

void ModelJob::Launch(int launch, int64_t now_ms) {
  launch_ = launch;
  launched_ms_ = now_ms;
  lineage_step_ = 0;
  for (int r = 0; r < world(); ++r) {
    Rank fresh;
    fresh.alive = true;
    fresh.incarnation = static_cast<uint64_t>(now_ms) * 1000000ull + static_cast<uint64_t>(launch);
    fresh.phase = Phase::kRestoring;
    fresh.restore_started_ms = now_ms;
    fresh.restore_index = restores_.size();
    ranks_[r] = fresh;
    RestoreRecord rec;
    rec.launch = launch;
    rec.rank = r;
    restores_.push_back(rec);
  }
  trace_(fmt::format("launch {}: {} ranks start and call ft_restore", launch, world()));
}

void ModelJob::Tick(int64_t now_ms, const std::function<std::string(int rank)>& plan_path_of) {
  for (int r = 0; r < world(); ++r) {
    Rank& k = ranks_[r];
    if (!k.alive) continue;
    if (now_ms >= k.kill_at_ms) {
      trace_(fmt::format("rank {}: SIGKILL after the grace", r));
      Exit(r, now_ms, -15, true);
      continue;
    }
    if (k.save_slot >= 0 && now_ms >= k.save_end_ms) FinishSave(r, now_ms);
    if (!k.alive) continue;
    const bool holding = k.terminating && (k.term_phase == 1 || k.term_phase == 3 || k.done_step + 1 > k.hold_after);
    switch (k.phase) {
      case Phase::kRestoring: TryRestore(r, now_ms, plan_path_of(r)); break;
      case Phase::kCompute:
        if (now_ms >= k.until_ms) k.phase = Phase::kCollective;
        break;
      case Phase::kGap:
        if (now_ms >= k.until_ms && !holding) {
          k.phase = Phase::kUpdate;
          k.until_ms = now_ms + draw_.update_ms + Jitter(0, draw_.update_ms / 4);
        }
        break;
      case Phase::kUpdate:
        if (now_ms >= k.until_ms) StepDone(r, now_ms);
        break;
      default: break;
    }
    if (k.alive && k.terminating) AdvanceTermination(r, now_ms);
  }
  bool all_in = true;
  for (const Rank& k : ranks_) all_in &= k.alive && k.phase == Phase::kCollective;
  if (all_in) CompleteCollective(now_ms);
}

void ModelJob::CompleteCollective(int64_t now_ms) {
  for (Rank& k : ranks_) {
    k.phase = Phase::kGap;
    k.until_ms = now_ms + Jitter(0, 60);
  }
}

void ModelJob::StepDone(int rank, int64_t now_ms) {
  Rank& k = ranks_[rank];
  ++k.done_step;
  k.phase = Phase::kCompute;
  k.until_ms = now_ms + std::max<int64_t>(50, draw_.step_ms - draw_.update_ms - 30 + Jitter(-draw_.step_ms / 10, draw_.step_ms / 10));
  // No periodic save while a termination runs: its own saves take the steps (ckpt_agent.cc).
  if (draw_.periodic_every > 0 && k.done_step % draw_.periodic_every == 0 && k.save_slot < 0 && !k.terminating) {
    StartSave(rank, now_ms, false, "periodic");
  }
}

void ModelJob::StartSave(int rank, int64_t now_ms, bool torn, const std::string& origin) {
  Rank& k = ranks_[rank];
  if (k.terminating && k.term_phase == 2 && k.done_step >= k.hold_after) {
    // The one step more's save replaces a copy only this process took (its termination or
    // just-in-time save), keeping the older one every rank took (ckpt_agent_term.cc).
    const ModelArena& a = arenas_[rank];
    const SlotCopy& committed = a.slot(a.committed() >= 0 ? a.committed() : 0);
    const bool local = committed.readable() && !committed.torn && committed.run == launch_ &&
                       (committed.origin == "termination" || committed.origin == "just-in-time");
    if (local && arenas_[rank].RecommitOlderSlot()) {
      trace_(fmt::format("rank {}: the one step more writes over its {} copy of step {}", rank, committed.origin,
                         committed.step));
    }
  }
  k.save_slot = arenas_[rank].BeginSave();
  k.save_end_ms = now_ms + draw_.save_ms;
  SlotCopy c;
  c.step = k.done_step;
  c.torn = torn;
  // A torn copy is labelled with the last completed step but holds part of the next update.
  c.digest = torn ? TornDigest(k.done_step, ShardOf(rank), static_cast<uint64_t>(now_ms)) : TrueDigest(k.done_step, ShardOf(rank));
  c.origin = origin;
  c.run = launch_;
  k.save_copy = c;
}

void ModelJob::FinishSave(int rank, int64_t now_ms) {
  Rank& k = ranks_[rank];
  SlotCopy c = k.save_copy;
  c.saved_unix_ms = now_ms;
  arenas_[rank].FinishSave(k.save_slot, c);
  k.save_slot = -1;
  trace_(fmt::format("rank {}: {} save of step {} committed{} (slot {}, committed slot {})", rank, c.origin, c.step,
                     c.torn ? " TORN" : "", arenas_[rank].FreeSlot() == 0 ? 1 : 0, arenas_[rank].committed()));
  for (const std::string& id : k.save_waiters) acks_.push_back(SaveAck{id, rank, "done", SavedMessage(c, draw_.save_ms)});
  k.save_waiters.clear();
}

void ModelJob::JitSave(int rank, const std::string& command_id, int64_t now_ms) {
  Rank& k = ranks_[rank];
  if (!k.alive || k.terminating || k.phase == Phase::kRestoring || k.done_step <= 0) {
    acks_.push_back(SaveAck{command_id, rank, "failed", "the rank cannot save now (ending, restoring or no step yet)"});
    return;
  }
  if (k.save_slot < 0) {
    const SlotCopy& committed = arenas_[rank].committed() >= 0 ? arenas_[rank].slot(arenas_[rank].committed()) : SlotCopy{};
    if (k.phase != Phase::kUpdate && committed.readable() && !committed.torn && committed.step == k.done_step) {
      acks_.push_back(SaveAck{command_id, rank, "done", SavedMessage(committed, 0)});
      return;
    }
    StartSave(rank, now_ms, k.phase == Phase::kUpdate, "just-in-time");
    trace_(fmt::format("rank {}: just-in-time save of step {}{}", rank, k.done_step, k.phase == Phase::kUpdate ? " inside the update (torn)" : ""));
  }
  k.save_waiters.push_back(command_id);
}

void ModelJob::Kill(int rank, int64_t now_ms) {
  if (!ranks_[rank].alive) return;
  trace_(fmt::format("rank {}: SIGKILL{}", rank, ranks_[rank].phase == Phase::kUpdate ? " inside its update" : ""));
  Exit(rank, now_ms, ranks_[rank].terminating ? -15 : -9, ranks_[rank].terminating);
}

void ModelJob::FailExit(int rank, int64_t now_ms) {
  if (!ranks_[rank].alive) return;
  trace_(fmt::format("rank {}: exits with status 1", rank));
  Exit(rank, now_ms, 1, false);
}

void ModelJob::Terminate(int rank, int64_t now_ms, bool by_worker) {
  Rank& k = ranks_[rank];
  if (!k.alive || k.terminating) return;
  k.terminating = true;
  k.by_worker = by_worker;
  k.term_at_ms = now_ms;
  k.kill_at_ms = now_ms + draw_.teardown_grace_ms;
  trace_(fmt::format("rank {}: SIGTERM{} at step {}{}", rank, by_worker ? " (worker's stop)" : "", k.done_step,
                     k.phase == Phase::kUpdate ? " inside its update" : ""));
  if (k.phase == Phase::kRestoring) {
    Exit(rank, now_ms, -15, true);
    return;
  }
  k.term_phase = k.phase == Phase::kUpdate ? 0 : 1;
  if (k.term_phase == 1) AdvanceTermination(rank, now_ms);
}

void ModelJob::AdvanceTermination(int rank, int64_t now_ms) {
  Rank& k = ranks_[rank];
  if (k.term_phase == 0) {
    if (k.phase == Phase::kUpdate) return;  // the update in progress finishes first
    k.term_phase = 1;
  }
  if (k.save_slot >= 0) return;  // a save running is joined
  const ModelArena& a = arenas_[rank];
  const SlotCopy none;
  const SlotCopy& committed = a.committed() >= 0 ? a.slot(a.committed()) : none;
  const bool held_saved = committed.readable() && !committed.torn && committed.step == k.done_step;
  if (k.term_phase == 1) {
    if (k.done_step == k.restored_step) {
      // Nothing this process computed (ckpt_agent_term.cc): the arena stays as it is.
      trace_(fmt::format("rank {}: no step completed in this process; ends without a termination save", rank));
      Exit(rank, now_ms, -15, true);
      return;
    }
    if (!held_saved) {
      StartSave(rank, now_ms, false, "termination");
      k.term_phase = 2;
      k.hold_after = k.done_step + 1;
      k.more_deadline_ms = -1;  // set once the first save ends
      return;
    }
    k.term_phase = 2;
    k.hold_after = k.done_step + 1;
    k.more_deadline_ms = -1;
  }
  if (k.term_phase == 2) {
    if (k.more_deadline_ms < 0) k.more_deadline_ms = now_ms + std::max<int64_t>(100, 2 * draw_.step_ms + 50);
    if (k.done_step >= k.hold_after && k.phase != Phase::kUpdate) {
      if (!held_saved) {
        StartSave(rank, now_ms, false, "termination");
        k.term_phase = 3;
        return;
      }
      Exit(rank, now_ms, -15, true);
      return;
    }
    if (now_ms >= k.more_deadline_ms) {
      trace_(fmt::format("rank {}: the step after {} did not complete; ends with that copy", rank, k.done_step));
      Exit(rank, now_ms, -15, true);
    }
    return;
  }
  if (k.term_phase == 3) Exit(rank, now_ms, -15, true);  // its save ended (joined above)
}

void ModelJob::Exit(int rank, int64_t now_ms, int64_t code, bool signalled) {
  Rank& k = ranks_[rank];
  if (k.save_slot >= 0) {
    arenas_[rank].AbortSave(k.save_slot);
    trace_(fmt::format("rank {}: its save of step {} dies with it (slot dropped)", rank, k.save_copy.step));
    k.save_slot = -1;
  }
  for (const std::string& id : k.save_waiters) acks_.push_back(SaveAck{id, rank, "failed", "the rank ended"});
  k.save_waiters.clear();
  k.alive = false;
  k.phase = Phase::kGone;
  ExitNote note;
  note.rank = rank;
  note.unix_ms = now_ms;
  note.code = code;
  note.stopped_by_worker = k.terminating && k.by_worker;
  note.terminated_by_signal = signalled && k.terminating ? 15 : 0;
  note.terminate_unix_ms = k.terminating ? k.term_at_ms : 0;
  note.step = k.done_step;
  exits_.push_back(note);
  trace_(fmt::format("rank {}: ended (code {}) at step {}", rank, code, k.done_step));
}

void ModelJob::TryRestore(int rank, int64_t now_ms, const std::string& plan_path) {
  Rank& k = ranks_[rank];
  RestoreRecord& rec = restores_[k.restore_index];
  ckpt::NodePlan plan;
  const Status read = ckpt::ReadLiveNodePlan(plan_path, &plan);
  if (!read.ok() || !plan.settling.empty()) {
    if (now_ms - k.restore_started_ms < kRestoreWaitMs) return;
    rec.done = true;
    rec.why = !read.ok() ? fmt::format("no plan file after FT_RESTORE_WAIT: {}", read.message())
                         : fmt::format("the plan was still settling after FT_RESTORE_WAIT: {}", plan.settling);
    k.phase = Phase::kHeld;
    trace_(fmt::format("rank {}: ft_restore failed: {}", rank, rec.why));
    return;
  }
  rec.done = true;
  rec.plan_version = plan.version;
  if (plan.step < 0) {
    rec.ok = true;
    rec.step = -1;
    k.done_step = 0;
  } else {
    const ckpt::PlanRank* pr = plan.Find(rank);
    const SlotCopy* found = nullptr;
    int found_rank = -1, found_slot = -1;
    if (pr != nullptr) {
      rec.planned_digest = pr->digest;
      for (const ckpt::PlanSource& src : pr->sources) {
        if (src.rank < 0 || src.rank >= world() || found != nullptr) continue;
        for (int s = 0; s < 2; ++s) {
          const SlotCopy& c = arenas_[src.rank].slot(s);
          if (c.readable() && !c.torn && c.step == plan.step && c.digest == pr->digest) {
            found = &c;
            found_rank = src.rank;
            found_slot = s;
            break;
          }
        }
      }
    }
    if (found == nullptr) {
      rec.why = pr == nullptr ? fmt::format("plan version {} (step {}) has no line for rank {}", plan.version, plan.step, rank)
                              : fmt::format("no source of plan version {} holds step {} with digest {:016x}", plan.version,
                                            plan.step, pr->digest);
      k.phase = Phase::kHeld;
      trace_(fmt::format("rank {}: ft_restore failed: {}", rank, rec.why));
      return;
    }
    rec.ok = true;
    rec.step = plan.step;
    rec.digest = found->digest;
    if (found_rank == rank) {
      arenas_[rank].CommitSlot(found_slot);
    } else {
      SlotCopy copy = *found;
      copy.origin = "restore";
      const int slot = arenas_[rank].BeginSave();
      arenas_[rank].FinishSave(slot, copy);
    }
    k.done_step = plan.step;
  }
  k.restored_step = k.done_step;
  lineage_step_ = std::max(lineage_step_, k.done_step);
  k.phase = Phase::kCompute;
  k.until_ms = now_ms + draw_.step_ms - draw_.update_ms;
  trace_(fmt::format("rank {}: ft_restore {} (plan version {})", rank,
                     rec.step < 0 ? std::string("starts from scratch") : fmt::format("restored step {}", rec.step),
                     rec.plan_version));
}

bool ModelJob::Settled(int steps) const {
  for (const Rank& k : ranks_) {
    const RestoreRecord& rec = restores_[k.restore_index];
    if (!rec.done) return false;
    if (!rec.ok) continue;
    if (!k.alive || k.done_step < std::max<int64_t>(k.restored_step, 0) + steps) return false;
  }
  return true;
}

int64_t ModelJob::NewestWholeEverywhere() const {
  const int shards = draw_.sharded ? world() : draw_.tp;
  int64_t bound = INT64_MAX;
  for (int shard = 0; shard < shards; ++shard) {
    int64_t newest = 0;
    for (int r = 0; r < world(); ++r) {
      if (ShardOf(r) != shard) continue;
      for (int s = 0; s < 2; ++s) {
        const SlotCopy& c = arenas_[r].slot(s);
        if (!c.readable() || c.torn) continue;
        if (c.run != launch_ && c.step > lineage_step_) continue;  // of a run the job left
        newest = std::max(newest, c.step);
      }
    }
    bound = std::min(bound, newest);
  }
  return bound == INT64_MAX ? 0 : bound;
}

int64_t ModelJob::NewestReached() const {
  int64_t newest = 0;
  for (const Rank& k : ranks_) newest = std::max(newest, k.done_step);
  return newest;
}

int64_t ModelJob::UpdateStartsIn(int rank, int64_t now_ms) const {
  const Rank& k = ranks_[rank];
  if (k.phase == Phase::kUpdate) return 0;
  if (k.phase == Phase::kGap) return std::max<int64_t>(0, k.until_ms - now_ms);
  return -1;
}

}  // namespace ft::model

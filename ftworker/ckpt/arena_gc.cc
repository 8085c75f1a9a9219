#include "ftworker/ckpt/arena_gc.h"

#include <fmt/format.h>

#include "common/names.h"

namespace ft::worker {

namespace {

ArenaGcDecision Keep(ArenaGcReason reason, std::string why) { return {false, reason, std::move(why)}; }
ArenaGcDecision Remove(ArenaGcReason reason, std::string why) { return {true, reason, std::move(why)}; }

constexpr Named<ArenaGcReason> kArenaGcReasonNames[] = {
    {ArenaGcReason::kRemovePersisted, "persisted"}, {ArenaGcReason::kRemoveEmpty, "empty"},
    {ArenaGcReason::kRemoveTorn, "torn"}, {ArenaGcReason::kKeepUntrusted, "untrusted"},
    {ArenaGcReason::kKeepHeld, "held"}, {ArenaGcReason::kKeepOtherJob, "other-job"},
    {ArenaGcReason::kKeepJobUnknown, "job-unknown"}, {ArenaGcReason::kKeepJobRunning, "job-running"},
    {ArenaGcReason::kKeepPlanned, "planned"}, {ArenaGcReason::kKeepNewestComplete, "newest-complete"},
    {ArenaGcReason::kKeepNewestVerified, "newest-verified"},
    {ArenaGcReason::kKeepNotPersisted, "not-persisted"}};
static_assert(NamesAreUnique(kArenaGcReasonNames));
}  // namespace

const char* ArenaGcReasonName(ArenaGcReason reason) { return NameIn(kArenaGcReasonNames, reason); }

ArenaGcDecision DecideArenaGc(const ArenaFacts& a, const JobGcFacts& job) {
  if (!a.trusted) {
    return Keep(ArenaGcReason::kKeepUntrusted,
                fmt::format("not a trusted arena ({}); left alone, remove it by hand if it is stale",
                            a.untrusted_why));
  }
  if (!a.held_by.empty()) {
    return Keep(ArenaGcReason::kKeepHeld,
                fmt::format("{} (it writes the arena, or restores from it)", a.held_by));
  }
  if (a.other_job) {
    return Keep(ArenaGcReason::kKeepOtherJob,
                fmt::format("it holds a copy of job '{}'; left to that job", a.copy_job));
  }
  if (!a.has_copy) return Remove(ArenaGcReason::kRemoveEmpty, "no committed copy and no live writer");
  if (a.torn) {
    return Remove(ArenaGcReason::kRemoveTorn,
                  fmt::format("step {} is torn (not a checkpoint) and no live writer", a.step));
  }
  if (!job.known) {
    return Keep(ArenaGcReason::kKeepJobUnknown,
                fmt::format("step {} may be the planned, newest complete or newest verified step: the "
                            "job's state is unknown ({})",
                            a.step, job.unknown_why.empty() ? "no Redis" : job.unknown_why));
  }
  if (!job.finished && !(job.planned_step > a.step)) {
    return Keep(ArenaGcReason::kKeepJobRunning,
                job.planned_step < 0
                    ? fmt::format("step {}: the job is not finished and has no restore plan yet", a.step)
                    : fmt::format("step {}: the job is not finished and its plan names step {}, not a "
                                  "newer one", a.step, job.planned_step));
  }
  const bool released = job.finished && job.release;
  if (released && a.persisted_in.empty()) {
    return Keep(ArenaGcReason::kKeepNotPersisted,
                fmt::format("step {} of rank {} is in no tier: kept although the job is released, it may "
                            "be the only copy", a.step, a.rank));
  }
  if (released) {
    return Remove(ArenaGcReason::kRemovePersisted,
                  fmt::format("step {} persisted in {}, the finished job released", a.step,
                              fmt::join(a.persisted_in, ",")));
  }
  if (a.step == job.planned_step) {
    return Keep(ArenaGcReason::kKeepPlanned,
                fmt::format("step {} is the planned step (a restart restores it from memory)", a.step));
  }
  if (a.step == job.newest_complete) {
    return Keep(ArenaGcReason::kKeepNewestComplete, fmt::format("step {} is the newest complete step", a.step));
  }
  if (a.step == job.newest_verified) {
    return Keep(ArenaGcReason::kKeepNewestVerified, fmt::format("step {} is the newest verified step", a.step));
  }
  if (a.persisted_in.empty()) {
    return Keep(ArenaGcReason::kKeepNotPersisted,
                fmt::format("step {} of rank {} is in no tier (not persisted yet, or the persist "
                            "failed: see the worker's log)", a.step, a.rank));
  }
  return Remove(ArenaGcReason::kRemovePersisted,
                fmt::format("step {} persisted in {}, not planned/newest", a.step,
                            fmt::join(a.persisted_in, ",")));
}

std::string ArenaGcLine(const ArenaFacts& arena, const ArenaGcDecision& decision) {
  return fmt::format("{} {}: {}", decision.remove ? "removed" : "kept", arena.path, decision.why);
}

}  // namespace ft::worker

// The master's own durable values, kept as fields of its state hash ft:{J}:master
// (docs/redis-schema.md) so that a restarted or standby master continues where the last one
// stood: `job_state` (JobState, a plain string), `action` (a decision being carried out) and
// `open_incident` (an incident window being collected). Same contract as codec.h: JSON with
// "v" first; decoding takes foreign bytes, checks every field's type and range, returns kCorrupt
// naming the first bad field or kUnsupported for another schema version, never throws; `out`
// is set only on success. The vocabularies of these values (JobState, DecisionKind,
// ActionPhase) are enums here, written as their names and read back by their parse; the codec
// refuses a name it does not know, naming it.
#ifndef FT_PROTO_MASTER_CODEC_H_
#define FT_PROTO_MASTER_CODEC_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/names.h"
#include "common/status.h"

namespace ft::proto {

// The job's state (`job_state` in the master hash): written as JobStateName, read back by
// DecodeJobState (ParseJobState's names; a reader decides what an unknown value means to it).
enum class JobState : uint8_t {
  kRunning,   // watched: incidents are collected and decided
  kStopping,  // a decision is being carried out (`action`)
  kStopped,   // every stop was acknowledged or its deadline passed
  kFinished,  // every rank exited cleanly, no incident open and no action under way
};
inline constexpr Named<JobState> kJobStateNames[] = {
    {JobState::kRunning, "running"}, {JobState::kStopping, "stopping"}, {JobState::kStopped, "stopped"},
    {JobState::kFinished, "finished"}};
inline constexpr auto kJobStates = ValuesIn(kJobStateNames);

constexpr const char* JobStateName(JobState s) { return NameIn(kJobStateNames, s); }
constexpr std::optional<JobState> ParseJobState(std::string_view name) { return ParseIn(kJobStateNames, name); }

// The job has ended, stopped by a decision or finished on its own: nothing runs to be watched
// until it is launched again (`ftmaster run --exit-when-stopped` exits).
inline constexpr bool JobEnded(JobState s) { return s == JobState::kStopped || s == JobState::kFinished; }

// The bytes of `job_state` (a plain string, not JSON) as a state: kCorrupt "unknown job state
// '<value>' (running, stopping, stopped, finished)" for anything else, the empty string included.
Status DecodeJobState(std::string_view text, JobState* out);

// What a decision does (MasterAction::decision, master::Decision::decision; Incident::decision
// carries its name): written as DecisionKindName, read back by ParseDecisionKind. An action is
// always save-then-stop or stop: its codec refuses "none" as it refuses an unknown name.
enum class DecisionKind : uint8_t {
  kNone,          // nothing to do: the incident is reported and watched
  kSaveThenStop,  // the save targets save a checkpoint, then every node is stopped
  kStop,          // every node is stopped, no save (no full checkpoint can be taken)
};
inline constexpr Named<DecisionKind> kDecisionKindNames[] = {
    {DecisionKind::kNone, "none"}, {DecisionKind::kSaveThenStop, "save-then-stop"},
    {DecisionKind::kStop, "stop"}};
inline constexpr auto kDecisionKinds = ValuesIn(kDecisionKindNames);

constexpr const char* DecisionKindName(DecisionKind d) { return NameIn(kDecisionKindNames, d); }
constexpr std::optional<DecisionKind> ParseDecisionKind(std::string_view name) {
  return ParseIn(kDecisionKindNames, name);
}

// An action's phases, in order: save (only a save-then-stop) → stop → done.
enum class ActionPhase : uint8_t {
  kSave,  // save commands to the save targets; their acks and copies awaited
  kStop,  // stop commands to every node; their acks awaited
  kDone,  // carried out: the job is stopped
};
inline constexpr Named<ActionPhase> kActionPhaseNames[] = {
    {ActionPhase::kSave, "save"}, {ActionPhase::kStop, "stop"}, {ActionPhase::kDone, "done"}};
inline constexpr auto kActionPhases = ValuesIn(kActionPhaseNames);

constexpr const char* ActionPhaseName(ActionPhase p) { return NameIn(kActionPhaseNames, p); }
constexpr std::optional<ActionPhase> ParseActionPhase(std::string_view name) {
  return ParseIn(kActionPhaseNames, name);
}

// The phase an action of decision `d` starts in.
inline constexpr ActionPhase FirstPhase(DecisionKind d) {
  return d == DecisionKind::kSaveThenStop ? ActionPhase::kSave : ActionPhase::kStop;
}

// A rank asked to save its shard before the job stops.
struct SaveTarget {
  int rank = -1;
  std::string node;  // from membership; empty when unknown
  bool operator==(const SaveTarget&) const = default;
};

// `action`: a persisted decision being carried out.
struct MasterAction {
  std::string incident;
  DecisionKind decision = DecisionKind::kStop;  // save-then-stop or stop
  std::vector<SaveTarget> save;
  ActionPhase phase = ActionPhase::kStop;
  bool sent = false;              // this phase's commands are in the streams
  std::string acks_from;          // acks stream id before they were sent
  int64_t deadline_unix_ms = 0;   // of this phase
  std::vector<std::string> nodes; // stop: the nodes commanded
  // The processes the action is for started before this (the incident window's opening, or
  // the decision if earlier): a process started since is a relaunch, never commanded.
  int64_t decided_unix_ms = 0;

  bool operator==(const MasterAction&) const = default;
};

// `open_incident`: an incident window being collected (its first event, when it opened, the
// busy outcomes written for it so far).
struct OpenIncident {
  std::string first_event_id;     // a stream id of ft:{J}:events
  int64_t first_event_unix_ms = 0;
  int64_t opened_unix_ms = 0;     // by the master's clock
  int outcomes = 0;               // busy outcomes written for this window
  std::string last_outcome;       // "busy:3,5"
  bool watching = false;          // a busy outcome stands; re-evaluated every hang_window

  bool operator==(const OpenIncident&) const = default;
};

// Where the job's time goes (`goodput` in the master hash; ftmaster/core/goodput.h accounts
// it): productive training, or lost to one of these causes. Written as GoodputCauseName.
enum class GoodputCause : uint8_t {
  kProductive,  // steps that advance the job past the furthest step it ever reached
  kStartup,     // ranks up but no step done yet: start-up, initialization and restore
  kDetection,   // the fault to its incident's decision
  kSaveStop,    // the decision to the job stopped: just-in-time saves, stop commands
  kRelaunch,    // the job stopped to its next launch's ranks up
  kRedone,      // steps trained again after a restore (up to the furthest step reached)
  kSlowed,      // the share of a slowed step beyond the job's normal step time (fail-slow)
  kIdle,        // the job is on but none of its ranks is up
};
inline constexpr Named<GoodputCause> kGoodputCauseNames[] = {
    {GoodputCause::kProductive, "productive"}, {GoodputCause::kStartup, "startup"},
    {GoodputCause::kDetection, "detection"}, {GoodputCause::kSaveStop, "save-stop"},
    {GoodputCause::kRelaunch, "relaunch"}, {GoodputCause::kRedone, "redone"},
    {GoodputCause::kSlowed, "slowed"}, {GoodputCause::kIdle, "idle"}};
inline constexpr auto kGoodputCauses = ValuesIn(kGoodputCauseNames);
inline constexpr size_t kGoodputCauseCount = sizeof(kGoodputCauses) / sizeof(kGoodputCauses[0]);

constexpr const char* GoodputCauseName(GoodputCause c) { return NameIn(kGoodputCauseNames, c); }
constexpr std::optional<GoodputCause> ParseGoodputCause(std::string_view name) {
  return ParseIn(kGoodputCauseNames, name);
}

// Seconds by cause, indexed by the cause's value.
using GoodputSeconds = std::array<double, kGoodputCauseCount>;

// The time one incident cost: what it lost from its fault until the job trained past the step
// it had reached again.
struct GoodputIncident {
  std::string id;                 // the incident's id ("" while its window is open)
  int64_t fault_unix_ms = 0;
  GoodputSeconds rank_s{};        // rank-seconds lost, by cause (kProductive unused)
  bool open = false;              // still costing: the job has not trained past its step again

  bool operator==(const GoodputIncident&) const = default;
};

// `goodput`: the job's time accounting, kept by the leading master and continued by the next.
struct Goodput {
  static constexpr size_t kMaxIncidents = 16;  // the newest kept

  int64_t since_unix_ms = 0;      // the job's first rank up (0: none yet)
  int64_t last_unix_ms = 0;       // accounted up to here
  GoodputSeconds rank_s{};        // rank-seconds by cause: wall seconds x the job's ranks
  GoodputSeconds wall_s{};        // wall seconds by cause
  GoodputCause phase = GoodputCause::kStartup;  // what the time is going to now
  int64_t furthest_step = -1;     // the furthest step any launch reached (-1: none known)
  int64_t redo_until_step = -1;   // this launch's steps up to here are done again (a restore's)
  double redo_left_s = -1;        // of them, the stepping time still to come (-1: not known yet)
  // The launch being accounted: the oldest incarnation (process start) among its ranks when it
  // began, and the newest seen since. A launch whose every running rank is newer than the
  // newest of this one is the next launch.
  uint64_t launch_incarnation = 0;
  uint64_t incarnation = 0;
  bool stepping = false;          // that launch has done a step
  double normal_step_ms = 0;      // the job's step time when nothing slows it (0: not known yet)
  std::vector<GoodputIncident> incidents;  // oldest first

  bool operator==(const Goodput&) const = default;
};

std::string Encode(const MasterAction& value);
std::string Encode(const OpenIncident& value);
std::string Encode(const Goodput& value);
Status Decode(std::string_view json, MasterAction* out);
Status Decode(std::string_view json, OpenIncident* out);
Status Decode(std::string_view json, Goodput* out);

}  // namespace ft::proto

#endif  // FT_PROTO_MASTER_CODEC_H_

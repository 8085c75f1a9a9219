// The values ftworker and ftmaster exchange through Redis (docs/redis-schema.md). Each is a
// small JSON object with "v": kSchemaVersion; proto/codec.h turns these structs into JSON and
// parses foreign bytes back defensively (a garbled value is an error naming the field, never
// a crash). The structs are plain data: every program that reads or writes Redis uses them,
// so the schema exists in one place.
#ifndef FT_PROTO_MESSAGES_H_
#define FT_PROTO_MESSAGES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/names.h"
#include "shm/op_kind.h"
#include "shm/save_ack.h"

namespace ft::proto {

inline constexpr int kSchemaVersion = 1;

// Size buckets for timeouts and summaries: 0 (< 64 KiB), 1 (< 1 MiB), 2 (< 16 MiB),
// 3 (< 256 MiB), 4 (the rest). Coarse on purpose: a timeout per bucket needs enough samples.
// The one rule: the worker's monitoring core uses it header-only (it does not link the codec).
constexpr int SizeBucket(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB;
  if (bytes < 64 * kKiB) return 0;
  if (bytes < kMiB) return 1;
  if (bytes < 16 * kMiB) return 2;
  if (bytes < 256 * kMiB) return 3;
  return 4;
}

// A rank's state as its worker reports it (RankProgress::state, Membership::state): written as
// RankStateName, read back by ParseRankState; the codec refuses a name it does not know. The
// one vocabulary of ftworker (RankMonitor), ftmaster and the docs.
enum class RankState : uint8_t {
  kRunning,   // the process runs under an active libft.so
  kDisabled,  // the process runs, but libft.so turned itself off (fail-open): unmonitored
  kExited,    // it ended through its normal exit path
  kDead,      // it ended otherwise: a crash, a kill
  kStopped,   // it ended after its worker signalled it (a stop command): not a crash
};

inline constexpr Named<RankState> kRankStateNames[] = {
    {RankState::kRunning, "running"}, {RankState::kDisabled, "disabled"}, {RankState::kExited, "exited"},
    {RankState::kDead, "dead"}, {RankState::kStopped, "stopped"}};
static_assert(NamesAreUnique(kRankStateNames));

constexpr const char* RankStateName(RankState state) { return NameIn(kRankStateNames, state); }
constexpr std::optional<RankState> ParseRankState(std::string_view name) { return ParseIn(kRankStateNames, name); }

// The process no longer runs (exited, died, or stopped by its worker): it cannot be the one a
// collective waits for any more, and its peers' waits on it are a consequence. A disabled rank
// still runs, and can still hang a collective.
inline constexpr bool ProcessGone(RankState s) {
  return s == RankState::kExited || s == RankState::kDead || s == RankState::kStopped;
}
// Its checkpoint agent cannot take a save: the process is gone, or libft.so is off in it.
inline constexpr bool CannotSave(RankState s) { return ProcessGone(s) || s == RankState::kDisabled; }

// The same for a state as it travels (a name): an empty one (not reported) is neither.
inline bool ProcessGone(std::string_view name) {
  std::optional<RankState> s = ParseRankState(name);
  return s.has_value() && ProcessGone(*s);
}
inline bool CannotSave(std::string_view name) {
  std::optional<RankState> s = ParseRankState(name);
  return s.has_value() && CannotSave(*s);
}
// A state as it travels is `s` (an empty or unknown name is none).
inline bool Is(std::string_view name, RankState s) { return ParseRankState(name) == s; }

// What a worker's event says happened (Event::kind). The codec refuses a name it does not know.
enum class EventKind : uint8_t {
  kTimeout,   // an op ran past its timeout
  kError,     // a CUDA or NCCL call failed
  kExit,      // the process ended (clean or not)
  kSlowdown,  // step time against the rank's own baseline
  kBusy,      // working on the host, not stuck
  kFrozen,    // stopped by a signal or a debugger, or its poller silent
  kHardware,  // a hardware or system signal changed on the node (Event::hw)
};

inline constexpr Named<EventKind> kEventKindNames[] = {
    {EventKind::kTimeout, "timeout"}, {EventKind::kError, "error"}, {EventKind::kExit, "exit"},
    {EventKind::kSlowdown, "slowdown"}, {EventKind::kBusy, "busy"}, {EventKind::kFrozen, "frozen"},
    {EventKind::kHardware, "hardware"}};
static_assert(NamesAreUnique(kEventKindNames));

constexpr const char* EventKindName(EventKind k) { return NameIn(kEventKindNames, k); }
constexpr std::optional<EventKind> ParseEventKind(std::string_view name) { return ParseIn(kEventKindNames, name); }

// What the master concluded (Incident::kind). The codec refuses a name it does not know.
enum class IncidentKind : uint8_t {
  kHang,           // ranks wait on one that is stuck in a kernel or in host code
  kHostFrozen,     // the stuck rank's process cannot run (stopped, poller silent)
  kCrash,          // a rank's process ended while others wait
  kTransportHang,  // every member of a communicator waits: the link, not a rank
  kBusy,           // a rank works on the host; nothing to do
  kStraggler,      // a rank is slower than its peers
  kSdc,            // a replica's checkpoint differs from its peers' (silent data corruption)
  kRestoreMismatch,  // the ranks of one launch restored different steps: stopped before it trains on
  kSlowLink,       // a communicator's transfer is slow while its members arrive on time: a link
  kJobSlow,        // every rank slowed alike (a slow data source, a congested fabric): no culprit
  kHardware,       // a critical hardware signal on a node of the running job, before anything hangs
};

inline constexpr Named<IncidentKind> kIncidentKindNames[] = {
    {IncidentKind::kHang, "hang"}, {IncidentKind::kHostFrozen, "host-frozen"},
    {IncidentKind::kCrash, "crash"}, {IncidentKind::kTransportHang, "transport-hang"},
    {IncidentKind::kBusy, "busy"}, {IncidentKind::kStraggler, "straggler"}, {IncidentKind::kSdc, "sdc"},
    {IncidentKind::kRestoreMismatch, "restore-mismatch"}, {IncidentKind::kSlowLink, "slow-link"},
    {IncidentKind::kJobSlow, "job-slow"}, {IncidentKind::kHardware, "hardware"}};
static_assert(NamesAreUnique(kIncidentKindNames));

constexpr const char* IncidentKindName(IncidentKind k) { return NameIn(kIncidentKindNames, k); }
constexpr std::optional<IncidentKind> ParseIncidentKind(std::string_view name) {
  return ParseIn(kIncidentKindNames, name);
}

// What a command asks a worker to do (Command::kind). Unlike the kinds above, the codec passes
// a name it does not know: the worker answers it not_supported, so a newer master learns
// within a second that an older worker cannot do it, instead of waiting out its deadline.
enum class CommandKind : uint8_t {
  kStop,        // SIGTERM the rank (rank -1: every rank of the node), SIGKILL after grace_s
  kSave,        // a just-in-time save now (the mailbox)
  kSaveAtStep,  // a save at the rank's next step boundary (the operator's `ftmaster save`)
  kStacks,      // the rank's stacks (py-spy/gdb, the Python dump), into the ack's message
  kMessage,     // text into the rank's mailbox (a test hook)
};

inline constexpr Named<CommandKind> kCommandKindNames[] = {
    {CommandKind::kStop, "stop"}, {CommandKind::kSave, "save"}, {CommandKind::kSaveAtStep, "save-at-step"},
    {CommandKind::kStacks, "stacks"}, {CommandKind::kMessage, "message"}};
static_assert(NamesAreUnique(kCommandKindNames));

constexpr const char* CommandKindName(CommandKind k) { return NameIn(kCommandKindNames, k); }
constexpr std::optional<CommandKind> ParseCommandKind(std::string_view name) {
  return ParseIn(kCommandKindNames, name);
}

// An op's kind (CommRow::op, Event::op, OpSummary::op, TimeoutEntry::op): the record format's
// one vocabulary (shm/op_kind.h: values and names in one table), written as OpKindName, read
// back by ParseOpKind; the codec refuses a name it does not know. kOther is a newer libft.so's
// kind this build does not know.
using OpKind = shm::OpKind;
using shm::kOpKinds;
using shm::OpKindName;
using shm::ParseOpKind;

// A collective with a root (one member's data goes to all, or all to one).
inline constexpr bool HasRoot(OpKind k) {
  return k == OpKind::kBroadcast || k == OpKind::kBcast || k == OpKind::kReduce || k == OpKind::kGather ||
         k == OpKind::kScatter;
}

// One row of a rank's progress table: one communicator as this rank sees it. Sequence numbers
// of collectives are equal across members for the same collective. A p2p row (p2p = true)
// counts this rank's own sends and receives on the comm: its numbers are not comparable
// across members; `peer` names the comm rank of the last entered p2p op.
struct CommRow {
  uint64_t comm_id = 0;
  bool p2p = false;
  int comm_rank = -1;
  int comm_size = 0;
  OpKind op = OpKind::kNone;     // kind of the last entered op
  uint64_t bytes = 0;            // of the last entered op
  int64_t peer = -1;             // root or peer (comm rank) of the last entered op, -1 none
  uint64_t entered_seq = 0;      // the host called the op
  uint64_t started_seq = 0;      // the GPU reached it
  uint64_t completed_seq = 0;    // the GPU finished it
  double entered_age_ms = -1;    // how long ago the last op was entered; -1 never
  double started_age_ms = -1;
  double completed_age_ms = -1;

  bool operator==(const CommRow&) const = default;
};

// What a rank is doing, read from its segment by its node's worker at observed_unix_ms.
struct RankProgress {
  int rank = -1;
  std::string node;
  int pid = 0;
  uint64_t incarnation = 0;
  std::string state;             // RankStateName: "running", "disabled", "exited", "dead", "stopped"
  int64_t observed_unix_ms = 0;
  double last_call_age_ms = -1;  // since the rank's last CUDA/NCCL call; -1 never
  double blocked_ms = 0;         // how long the host has been inside a synchronizing call; 0 not
  double cpu_pct = 0;            // the process's CPU use over the last second (% of one core)
  bool busy = false;             // still working on the host: not stuck (see docs)
  // The process as the kernel and libft.so's poller show it. proc_state: the state letter of
  // /proc/<pid>/stat ("R", "S", "D", "T" stopped, "t" traced; empty unknown). heartbeat_age_ms:
  // since the poller thread last advanced the segment's heartbeat (-1 never or unknown).
  // frozen: the process cannot run (stopped by a signal or a debugger) or its poller has been
  // silent past FT_FROZEN_AFTER: its table no longer moves, whatever it shows in flight.
  std::string proc_state;
  double heartbeat_age_ms = -1;
  bool frozen = false;
  std::vector<CommRow> comms;

  bool operator==(const RankProgress&) const = default;
};

// An event a worker raises. kind: EventKindName.
// One hardware or system signal a worker read (ftworker/health): an event of a device (an
// Xid, an OOM kill) or the increase of one of its error counters, as it travels (Event::hw,
// Incident::hardware). kind and its criticality: ftworker/health/signal_kinds.h.
struct HwSignal {
  std::string node;        // the node it was read on ("" inside an Event: Event::node says it)
  std::string source;      // "nvml", "rdma" (sysfs port counters), "kmsg" (the kernel log)
  std::string device;      // a GPU's PCI bus id "0000:3b:00.0", a NIC port "mlx5_0/1", "host"
  std::string kind;        // "xid", "ecc-uncorrected", "link-downed", "oom-kill", ...
  int64_t value = 0;       // an Xid's number; a counter's increase; a throttle reason mask
  int64_t total = 0;       // a counter's value now (0 for events)
  bool critical = false;   // evidence against the hardware (application-class Xids are not)
  std::vector<int> ranks;  // the ranks whose GPU or nearest NIC it is; empty: the node's
  int pid = 0;             // oom-kill: the victim
  int64_t unix_ms = 0;     // when the worker read it (kmsg: the line's own time)
  std::string detail;      // for people: the kernel log line, the counter's sysfs name

  bool operator==(const HwSignal&) const = default;
};

struct Event {
  std::string kind;
  int rank = -1;
  std::string node;
  int64_t unix_ms = 0;
  std::string message;           // for people: what happened, what to do
  // timeout: the op that ran past its timeout.
  uint64_t comm_id = 0;
  OpKind op = OpKind::kNone;
  uint64_t seq = 0;
  double age_ms = 0;              // timeout: the op's age; frozen: how long the process has been frozen
  double timeout_ms = 0;
  bool started = false;          // the GPU had reached it (waiting on peers), else not
  // error: the failed call; exit: how the process ended.
  std::string api;               // "cudart" or "nccl"
  std::string call;              // the symbol
  int64_t code = 0;              // error: its return code; exit: exit status or -signal
  bool clean = false;            // exit: the process ended through its normal exit path with status 0
  bool status_unknown = false;   // exit: how it ended is unknown to the worker (code says nothing)
  // exit: a signal told the process to terminate before it ended (libft.so wrote it into the
  // segment header: SIGTERM from a launcher or scheduler), and when (Unix ms); 0 none. A death
  // that follows was asked for: a teardown, not a crash.
  int terminated_by_signal = 0;
  int64_t terminate_unix_ms = 0;
  // slowdown: step time now against the rank's own baseline.
  double step_ms = 0;
  double baseline_ms = 0;
  double compute_ms = 0;
  RankProgress progress;         // the rank's whole progress table at the event
  HwSignal hw;                   // hardware: the signal (rank -1: the node's)

  bool operator==(const Event&) const = default;
};

// The fields every event has, set in one place: `kind` about `rank` (-1: the node as a whole)
// on `node` at `unix_ms`. The kind's own fields are its maker's.
inline Event NewEvent(EventKind kind, int rank, std::string node, int64_t unix_ms) {
  Event e;
  e.kind = EventKindName(kind);
  e.rank = rank;
  e.node = std::move(node);
  e.unix_ms = unix_ms;
  return e;
}

// An exit event that says the rank finished: its exit path with status 0. A failing status
// (an uncaught exception exits 1 through the same path) is a failure, whatever an older worker
// wrote in `clean`.
inline bool EndedCleanly(const Event& e) {
  return e.kind == EventKindName(EventKind::kExit) && e.clean && e.code == 0;
}

struct OpSummary {
  uint64_t comm_id = 0;
  OpKind op = OpKind::kNone;
  int bucket = 0;
  uint64_t count = 0;            // ops completed in the window
  // The window's 10th percentile: the op's time with the least added by the host. An observed
  // duration only grows when the poller or the simulated device waits for a CPU, so a low
  // quantile is what comms are compared on (a slow link, ftmaster/core/straggler.h); a link that
  // is slow makes every op slow, its fastest too. Negative: not reported (a worker before it).
  double p10_ms = -1;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  uint64_t last_seq = 0;
  // The window's durations added up: the worker's own figure (ft_worker_collective_seconds_total),
  // not written to Redis (the codec leaves it out; a decoded summary has 0).
  double sum_ms = 0;

  bool operator==(const OpSummary&) const = default;
};

// One kernel's sampled GPU durations over a summary window (FT_KERNEL_SAMPLE in libft.so).
struct KernelSummary {
  std::string name;  // the device name's first 16 bytes, or the host stub as 0x... if unnamed
  uint64_t count = 0;  // samples in the window
  double p50_ms = 0;
  double max_ms = 0;

  bool operator==(const KernelSummary&) const = default;
};

// A rank's periodic summary: durations over the last window, step time inferred from the
// repeating sequence of collectives (0 while unknown).
struct RankSummary {
  int rank = -1;
  std::string node;
  int64_t unix_ms = 0;
  uint64_t steps = 0;            // steps observed since the rank started
  double step_ms = 0;            // the last step
  double step_p50_ms = 0;        // median over the window
  double compute_ms = 0;         // median time per step outside collectives
  double comm_wait_ms = 0;       // median time per step inside collectives
  uint64_t records = 0;
  uint64_t dropped = 0;
  std::vector<OpSummary> ops;
  uint64_t kernels = 0;          // kernel launches in the window, all streams
  std::vector<KernelSummary> kernel_samples;  // empty unless libft.so samples kernels
  // What the job says of its steps (shm app_step_plus1, total_steps): the step of its last
  // ft_step_done (-1: none yet, or the job does not mark its steps), and the steps it runs in
  // all, numbered alike (0: not said; ft_set_total_steps, FT_TOTAL_STEPS). Their difference is
  // the job's horizon for a slowdown (ftmaster/core/slow_policy.h).
  int64_t declared_step = -1;
  int64_t total_steps = 0;
  // The worker's slowdown detector (ftworker/monitor/slowdown_detector.h): 1 while a slowdown
  // it raised stands (its hysteresis has not cleared it), 0 while none does, -1 not said (a
  // worker older than the field). A worker raises one `slowdown` event per episode and none
  // when it ends: this is how the master knows a reported rank is still slow.
  int slowdown = -1;

  bool operator==(const RankSummary&) const = default;
};

struct CommMember {
  uint64_t comm_id = 0;
  bool p2p = false;
  int comm_rank = -1;
  int comm_size = 0;

  bool operator==(const CommMember&) const = default;
};

struct Membership {
  int rank = -1;
  int local_rank = -1;
  int world_size = -1;
  std::string node;
  std::string host;
  int pid = 0;
  uint64_t incarnation = 0;
  std::string state;             // as RankProgress::state
  int64_t unix_ms = 0;
  std::vector<CommMember> comms;
  // Of an ended rank: the step of its last ft_step_done (-1: unknown, or none; a running rank's
  // membership leaves it out, so it is not rewritten every step). After a clean exit of every
  // rank, the step the job ended at: the master keeps only that step's copies plannable.
  int64_t step = -1;
  // What the rank's ft_restore did (shm restored_step_plus2): -2 not known (not called yet, or an
  // older libft.so), -1 restored nothing, else the step restored; restore_plan: the version of
  // the plan it read. The master stops a launch whose ranks restored different steps.
  int64_t restored_step = -2;
  int64_t restore_plan = 0;

  bool operator==(const Membership&) const = default;
};

struct TimeoutEntry {
  uint64_t comm_id = 0;
  OpKind op = OpKind::kNone;
  int bucket = 0;
  double ms = 0;

  bool operator==(const TimeoutEntry&) const = default;
};

// Published by the master; workers use default_ms where no entry matches.
struct TimeoutTable {
  uint64_t version = 0;
  double default_ms = 0;
  int64_t unix_ms = 0;
  std::vector<TimeoutEntry> entries;

  bool operator==(const TimeoutTable&) const = default;
};

// A command for the worker of one node. kind: "stop" (SIGTERM, then SIGKILL after grace_s),
// "message" (text into the rank's mailbox), "save" (just-in-time checkpoint). rank -1: every
// rank of the node. id is unique per command; executing an id twice does nothing the second time.
// One rank's process a command was decided for: its membership's incarnation (the process's
// start, CLOCK_REALTIME ns on its node) as the writer saw it.
struct RankIncarnation {
  int rank = -1;
  uint64_t incarnation = 0;

  bool operator==(const RankIncarnation&) const = default;
};

struct Command {
  std::string id;
  std::string kind;  // CommandKindName (a name this release does not know passes: see CommandKind)
  int rank = -1;
  std::string text;
  double grace_s = 10;
  int64_t unix_ms = 0;
  // The processes the command is for: a worker executes it only for a rank whose current
  // incarnation is the one named here, and acks it "stale" for any other (a relaunched rank
  // must never act on its predecessor's commands, also when a worker replays its stream).
  // A rank not named (its membership unknown to the writer, or a writer before this field):
  // executed only by a process that started before the decision (decided_unix_ms).
  std::vector<RankIncarnation> incarnations;
  // When the master decided what the command carries out (0: unix_ms); a rank not named above
  // must have started before it.
  int64_t decided_unix_ms = 0;

  bool operator==(const Command&) const = default;
};

// How a worker answered a command (CommandAck::result). A reader takes a name it does not know
// for a failure (Is(ack, kDone) is false), so a newer worker's answer never reads as success.
enum class AckResult : uint8_t {
  kDone,               // carried out (a save: its copy is in `saved`)
  kNotSupported,       // this node cannot (a libft.so without checkpoints, stacks off, an unknown kind)
  kNothingRegistered,  // a save asked of an application that never called ft_register
  kScheduled,          // a save-at-step accepted for the rank's next step
  kFailed,             // tried and failed, or no answer from the rank in time
  kNoSuchRank,         // no rank of that number on the node
  kStale,              // the rank runs another process than the one the command was for: not executed
};

inline constexpr Named<AckResult> kAckResultNames[] = {
    {AckResult::kDone, "done"}, {AckResult::kNotSupported, "not_supported"},
    {AckResult::kNothingRegistered, "nothing_registered"}, {AckResult::kScheduled, "scheduled"},
    {AckResult::kFailed, "failed"}, {AckResult::kNoSuchRank, "no_such_rank"}, {AckResult::kStale, "stale"}};
static_assert(NamesAreUnique(kAckResultNames));

constexpr const char* AckResultName(AckResult r) { return NameIn(kAckResultNames, r); }

// A save's outcome, typed: the step, digest, tornness, bytes and duration of the copy a rank
// took, as the mailbox's acknowledgement carries it (shm/save_ack.h).
using SavedCopy = shm::SavedCopy;

struct CommandAck {
  std::string id;
  std::string node;
  int rank = -1;
  std::string result;  // AckResultName
  std::string message;
  int64_t unix_ms = 0;
  // A save's or save-at-step's "done": the copy (the message says the same for people). A worker
  // of the previous release wrote the message only: the codec reads the copy from it then.
  std::optional<SavedCopy> saved;

  bool operator==(const CommandAck&) const = default;
};

struct Suspect {
  int rank = -1;
  std::string node;
  std::string why;               // e.g. "never reached allreduce #812 on comm 3fa2..; 7 ranks wait on it"

  bool operator==(const Suspect&) const = default;
};

// A node the incident's decision evicted (ft:{J}:evicted), and why (`evicted_why:<node>`).
struct Eviction {
  std::string node;
  std::string why;

  bool operator==(const Eviction&) const = default;
};

// kind: IncidentKindName.
struct Incident {
  std::string id;
  std::string kind;
  std::vector<Suspect> suspects;
  uint64_t comm_id = 0;          // transport-hang: the communicator
  std::vector<std::string> evidence;  // "rank 3 waits on allreduce #812 of comm 3fa2.. (started, 2.1 s)"
  // The hardware and system signals of the suspects' GPUs, NICs and hosts from around the
  // incident (ftmaster/hw_evidence.h), critical first; hardware_checked with none: "none found".
  std::vector<HwSignal> hardware;
  bool hardware_checked = false;
  double confidence = 0;         // 0..1
  int64_t first_event_unix_ms = 0;
  int64_t window_closed_unix_ms = 0;  // the collection window found closed (master's clock)
  int64_t decided_unix_ms = 0;        // attribution and decision done
  double decide_ms = 0;          // first event to decision
  std::string decision;          // DecisionKindName (master_codec.h): "save-then-stop", "stop", "none"; "" undecided
  // The nodes this incident's decision evicted, with the reasons, as written beside it: a
  // node's history across jobs is built from the incident stream alone (node_history.h).
  std::vector<Eviction> evicted;
  std::string message;

  bool operator==(const Incident&) const = default;
};

inline bool Is(const Event& e, EventKind k) { return e.kind == EventKindName(k); }
inline bool Is(const Incident& i, IncidentKind k) { return i.kind == IncidentKindName(k); }
inline bool Is(const Command& c, CommandKind k) { return c.kind == CommandKindName(k); }
inline bool Is(const CommandAck& a, AckResult r) { return a.result == AckResultName(r); }
inline bool Is(std::string_view result, AckResult r) { return result == AckResultName(r); }

// The value of ft:{J:g<k>}:worker:<node> (the node's group, proto/keys.h), refreshed every
// second with a short TTL: its absence means the worker is gone. ranks: the global ranks the
// worker currently reads on its node.
struct WorkerHeartbeat {
  std::string node;
  std::string host;
  int pid = 0;
  std::vector<int> ranks;
  int64_t unix_ms = 0;

  bool operator==(const WorkerHeartbeat&) const = default;
};

}  // namespace ft::proto

#endif  // FT_PROTO_MESSAGES_H_

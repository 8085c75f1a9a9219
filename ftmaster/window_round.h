// ft::master::WindowRound: the master loop's events and incident windows. It reads
// ft:{J}:events after its cursor (`events_cursor` in the master hash, so a restarted or standby
// master continues where the last one stopped), opens a window at the first timeout, exit or
// error event (`open_incident`), collects events and the progress tables of the window's
// communicators' members (window_reads.h) until WindowCanClose or hang_window, attributes
// (attribution.h), decides (core/window_decision.h, pure) and writes each incident exactly once
// (FencedWriter::WriteIncidents). A busy outcome is written when it changes and re-evaluated
// every hang_window. It tells the workers when a window opens, stays open and closes
// (proto/notice.h): while one is open they write every rank's progress table.
// An action decided here is handed to the loop (Step's answer), which gives it to the action
// runner. Single-threaded, owned by MasterLoop.
#ifndef FT_FTMASTER_WINDOW_ROUND_H_
#define FT_FTMASTER_WINDOW_ROUND_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ftmaster/core/attribution.h"
#include "ftmaster/core/busy_watch.h"
#include "ftmaster/core/incident_window.h"
#include "ftmaster/core/membership_gap.h"
#include "ftmaster/core/window_decision.h"
#include "ftmaster/core/window_reads.h"
#include "ftmaster/job_membership.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/store.h"
#include "proto/rank_ranges.h"

namespace ft::master {

// A window closed with an action: this master's (it won the write: start it) or another's that
// decided the same window first (carry out what that one stored).
struct WindowAction {
  Action action;
  bool ours = false;
};

class WindowRound {
 public:
  using Clock = LoopContext::Clock;

  WindowRound(LoopContext* ctx, JobMembership* membership) : ctx_(ctx), membership_(membership) {}

  // A new term: no window, no cursor, no tables; the tables are due now.
  void NewTerm(Clock::time_point now);
  // From the master hash: the events cursor and an open window, whose events are read again
  // (from its first event to the cursor). False when Redis failed (the term is loaded again).
  bool LoadTerm(const MasterHash& state, int64_t unix_ms);

  // New events, up to kMaxEventBatchesPerTick batches; the cursor (and a window just opened)
  // written back with each.
  void ReadEvents(Clock::time_point now, int64_t unix_ms);
  // Tells every worker that a window opened (and again every kWindowNoticeRenew while it
  // stays open, or at once when its members changed) or closed (proto/notice.h): while it is
  // open they write the progress tables of the window's members at every report, which calm
  // ranks otherwise write only on a change. The open notice waits for the window's first read
  // of its members (the same tick), so that it can name them.
  void Notice(Clock::time_point now);
  // With a window open: reads its tables when due, and closes and decides it when it can.
  std::optional<WindowAction> Step(Clock::time_point now, int64_t unix_ms);
  // The tables read so far say nothing any more (the job was launched again).
  void ForgetProgress() { progress_.Clear(); }
  // Where `slowdown` events go (they open no window): the summary round's job-wide view.
  void OnSlowdown(std::function<void(const proto::Event&, int64_t unix_ms)> f) { on_slowdown_ = std::move(f); }

  // The hardware signals the workers reported lately, by node: the incidents' evidence.
  const HwLog& hardware() const { return hardware_; }

  bool open() const { return open_.open; }
  // The processes when the open (or last) window opened: those its action is for. Empty for a
  // window continued from another master's.
  const std::vector<proto::Membership>& members_at_open() const { return members_at_open_; }
  const std::string& cursor() const { return cursor_; }
  const IncidentWindow& window() const { return open_; }

 private:
  void TakeEvent(const std::string& id, proto::Event event, int64_t unix_ms);
  // A hardware event: kept as evidence; a critical one on a node of the running job, with no
  // incident window open, is reported at once as a "hardware" incident (its node a suspect
  // before anything fails), once per (node, device, kind) per kHardwareRepeatMs.
  void TakeHardware(const proto::Event& event, int64_t unix_ms);
  // Asks the workers for the stacks of the written incidents' suspects (stacks_request.h).
  void RequestStacks(const std::vector<proto::Incident>& written, int64_t unix_ms);
  bool ReadProgress(Clock::time_point now);
  // A window ready to close whose membership lacks ranks it needs (core/membership_gap.h):
  // true while it waits for them, read every tick, at most kMembershipWaitMs past hang_window.
  bool WaitsForMembership(Clock::time_point now, int64_t unix_ms);
  bool ReadRanks(Clock::time_point now) { return membership_->Read(now, /*window_open=*/true); }
  // closed_at: when the window was found closed (real clock, for the stats).
  std::optional<WindowAction> Close(Clock::time_point closed_at, int64_t unix_ms);
  // The fenced write of a decision, and what follows once it is accepted.
  std::optional<WindowAction> Commit(WindowDecision d, Clock::time_point closed_at, int64_t unix_ms);
  void CloseIncident(const std::string& why);
  // A watched window's busy ranks all back in the job (entering ops again): why it is over;
  // nullopt while any is still away (or its table cannot be read).
  std::optional<std::string> BusyRanksResumed();
  // `rank`'s newest table the window holds (its progress or an event's); nullptr none.
  const proto::RankProgress* NewestProgress(int rank) const;
  AttributionInput Input(int64_t unix_ms) const;
  // The ranks an open window's notice names: its members, or none (every rank) when the
  // membership is not known or too many to name.
  std::optional<proto::RankRanges> NoticeRanks() const;
  // Clean exits (not after a terminate signal) that tell a dying job's teardown from a crash
  // (attribution.h): NoteCleanExit keeps those read in the events (within the teardown
  // horizon), CollectCleanExits adds the membership's and fills clean_exit_times_ for Input.
  void NoteCleanExit(int64_t unix_ms);
  void CollectCleanExits();

  static constexpr size_t kMaxCleanExits = 4096;
  // A worker reconnects to Redis with a backoff of at most 5 s (redis::RetryPolicy) and writes
  // its ranks again at its next report.
  static constexpr int64_t kMembershipWaitMs = 6000;
  static constexpr int64_t kHardwareKeepMs = 10 * 60'000;
  static constexpr int64_t kHardwareRepeatMs = 10 * 60'000;

  std::function<void(const proto::Event&, int64_t)> on_slowdown_;
  HwLog hardware_;
  // Each node's crashes and stopped processes (Unix ms) within kRepeatedFailureMs: persisted as
  // `failures:<node>` with the decision, read back at a term's start.
  FailureHistory failures_;
  std::map<std::string, int64_t> hardware_reported_;  // "node|device|kind" -> when
  std::map<int, BusyWatchStart> watched_busy_;  // a watched window's busy ranks -> where they stood
  LoopContext* ctx_;
  JobMembership* membership_;
  std::string cursor_;                 // last event id processed ("" none)
  IncidentWindow open_;
  DecodedHash<proto::RankProgress> progress_{"progress"};
  WindowReads window_reads_;           // over membership_->values(), rebuilt when they change
  uint64_t window_reads_for_ = 0;      // the membership version it was built for
  std::vector<proto::Membership> window_membership_;  // the open window's members
  bool window_whole_ = false;          // progress_ holds every table (no membership known)
  std::string membership_of_window_;   // the window (first event id) those were read for
  std::optional<proto::RankRanges> notice_ranks_;  // NoticeRanks() at that read
  std::string notice_ranks_text_ = "*";            // its text ("*": none named, every rank)
  Clock::time_point next_progress_{};
  std::deque<int64_t> clean_exits_;        // unix_ms of clean exits read in the events
  std::vector<int64_t> clean_exit_times_;  // Input()'s, by CollectCleanExits
  std::map<int, uint64_t> teardown_deaths_;  // rank -> its process that died told to terminate
  std::vector<proto::Membership> members_at_open_;  // the processes when the window opened (slim)
  MembershipGap gap_;                // what the membership lacked at its last version
  uint64_t gap_for_ = UINT64_MAX;    // that version
  size_t gap_events_ = 0;            // and the window's events then
  std::string gap_window_;           // the window whose wait for it was said ("" none)
  // The incarnation of a running process of `rank` newer than `incarnation` (0: none): an event
  // of an older process is not about the job as it runs now.
  uint64_t NewerProcessOf(int rank, uint64_t incarnation);
  std::unordered_map<int, uint64_t> newest_by_rank_;  // rank -> its newest running incarnation
  uint64_t newest_by_rank_for_ = UINT64_MAX;           // the membership version it was built for
  bool window_noticed_ = false;  // the last window notice written said "open"
  std::string noticed_window_;   // and named this window
  std::string noticed_ranks_;    // and these ranks ("*": none named, every rank)
  Clock::time_point next_window_notice_{};
};

}  // namespace ft::master

#endif  // FT_FTMASTER_WINDOW_ROUND_H_

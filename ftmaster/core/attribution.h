// Hang attribution: from the ranks' progress tables, name the ranks (or the communicator) the
// job is stuck on. Pure logic over plain values: no Redis, no clock (now is passed in).
// Attribute runs four phases, each in its own file: the Snapshot of the ranks
// (attribution_snapshot.h), the WaitForGraph (attribution_graph.h), Classify
// (attribution_classify.h: roots, how each is stuck, confidences) and WriteIncidents
// (attribution_evidence.h: suspects' why, evidence, messages). The rules below are theirs.
//
// The wait-for graph (nodes are ranks):
//   - frozen ranks (the worker saw the process stopped, state T/t, or its poller's heartbeat
//     silent past FT_FROZEN_AFTER) and dead ones wait on nothing: their tables stopped moving.
//   - collective row of rank a on comm C with started > completed: a waits on (C, s) with
//     s = completed + 1 (its GPU reached s and waits on peers). Every other member b of C whose
//     row has started < s (or no row), whose report is missing, who is dead, or who is frozen
//     and has not completed s, blocks a.
//   - a laggard: a's row shows (C, s) in flight while a live member has completed s. The
//     collective is over (it completes on all members or none); a has stopped observing it
//     (its process froze). a waits on nothing, and the members waiting in s + 1 wait on it.
//     Not for rooted collectives (broadcast, reduce, gather, scatter) unless a is frozen: a
//     member may finish those before the others, so the pattern proves nothing there.
//   - p2p row of a on C with started > completed: a waits on its peer p (row.peer, a comm
//     rank). p blocks a unless p's own p2p row on C is also on the GPU (started > completed)
//     toward a with the complementary op (send/recv): then neither can finish by the other's
//     fault, and the pair is a transport hang on C.
//   - a collective (C, s) that some rank waits on and no member blocks: every member is alive,
//     not frozen and started s; when none completed it, it is a transport hang on C
//     (confidence 0.7; 0.5 when some members completed it, which a consistent snapshot cannot
//     show).
// Roots are ranks that block others and wait on nothing themselves (dead or silent ranks
// count as waiting on nothing). Roots that nobody has waited on for min_wait_ms yet are healthy
// in-flight work and are not reported; so are transport hangs whose last member (a pair's later
// side) arrived less than min_wait_ms ago: the op could not complete before, and a rank that
// reached its peers late (a start-up restore, a slow step) is no broken link — if the op stays
// stuck, that member's own timeout raises it again. Each root is classified:
//   - crash: state "dead"/"exited" (report or membership) or an "exit" event; confidence 0.95.
//   - host frozen: the rank is frozen (above); confidence 0.9. Its own incident kind.
//   - busy: the report says busy (still calling CUDA/NCCL or using CPU): not a hang; incident
//     kind "busy", decision "none".
//   - lagging: a laggard that is not known to be frozen (an older worker, or a poller stuck
//     while the process runs); confidence 0.7, in the hang incident.
//   - compute hang: some row has entered > started (the host issued work the GPU never
//     reached: the GPU is stuck in the rank's own work); confidence 0.9.
//   - host hang: nothing queued on the GPU, the host never entered (C, s); confidence 0.85.
//   - missing report (no progress for a blocking rank): a suspect with confidence 0.5.
//   A stale report (older than stale_ms) multiplies the suspect's confidence by 0.6.
// Ranks dead or frozen on their own (an incident whether or not anyone is seen waiting on
// them: peers may wait outside NCCL — a CPU collective, a store barrier, a data loader — or be
// between collectives):
//   - a rank whose "exit" event in the window says it died without a clean exit is a crash
//     suspect (confidence 0.95) unless it was asked to end: libft.so recorded a terminate signal
//     (terminated_by_signal: SIGTERM from a launcher or scheduler, teardown), the worker stopped
//     it (state "stopped"), or another rank of the job exited cleanly at most
//     finish_teardown_ms before it died (the job was finishing and its launcher tore down the
//     rest). Those are never crash roots, also when others wait on them; when nothing else is
//     named the attribution is empty and `why_none` says why (every rank SIGTERMed by a
//     preemption or scancel is no incident: the termination save is libft.so's business).
//   - a rank with a "frozen" event in the window whose newest report still says frozen is a
//     host-frozen suspect (confidence 0.9).
// Waiters that reach no root and no transport hang (a wait-for cycle: reports taken at
// different moments) make their blocking ranks suspects of the hang incident with
// confidence 0.3.
//
// Incidents (one attribution may give several; each incident's confidence is the lowest of
// its suspects'):
//   - one "hang" incident with every hang root as a suspect (independent hangs in different
//     groups are one job-level event: the job stops or saves once), and likewise
//     and one "host-frozen", one "crash" and one "busy" incident;
//   - one "transport-hang" incident per communicator, suspects = all its members (or the pair
//     for p2p), comm_id set; the message says whether the members share one node.
// Ids are "<first_event_unix_ms>-<kind>[-<comm hex>]": deterministic, so a master that
// restarts and decides the same window again writes the same ids. `decision` is "none" for
// busy, empty otherwise (see decision.h). Evidence lists the events and, per suspect, what
// waits on it, capped at max_evidence lines.
//
// Cost: linear in the number of progress rows plus, per distinct (comm, seq) waited on, the
// comm's size. 16k ranks with three communicators each take a few milliseconds on one core.
#ifndef FT_FTMASTER_ATTRIBUTION_H_
#define FT_FTMASTER_ATTRIBUTION_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "proto/messages.h"

namespace ft::master {

struct AttributionInput {
  // The latest progress per rank (any order; for a rank listed twice, or also attached to an
  // event, the newest observed_unix_ms wins).
  std::span<const proto::RankProgress> progress;
  // Who is in which communicator (maps comm ranks to global ranks; progress rows fill gaps).
  std::span<const proto::Membership> membership;
  // The events collected in the window (timeouts, errors, exits, busy).
  std::span<const proto::Event> events;
  int64_t now_unix_ms = 0;
  // A report older than this is stale: still used, with lower confidence. Should exceed the
  // workers' report period plus the hang window.
  double stale_ms = 3000;
  // A root or stuck collective is reported only once some rank's GPU has waited on it at
  // least this long: in any snapshot of a healthy job, fast ranks wait briefly for slow ones
  // and every member of a running collective has started it without completing it. Use about
  // the smallest published timeout (timeout_floor). Unknown ages count as long waits.
  double min_wait_ms = 1000;
  // Cap on evidence lines per incident.
  int max_evidence = 20;
  // When ranks of the job exited cleanly (Unix ms by their workers' clocks; not those that had
  // been told to terminate), any order: a rank dying at most finish_teardown_ms after one of
  // them died in the job's teardown. Clean exit events in `events` count too.
  std::span<const int64_t> clean_exit_unix_ms;
  int64_t finish_teardown_ms = 60000;
  // Processes that died after being told to terminate (rank -> incarnation), from the exit
  // events of earlier windows: a teardown death, whichever window sees its peers wait on it.
  const std::map<int, uint64_t>* teardown_deaths = nullptr;
};

// Attributes the current state. Empty when nothing waits (the hang resolved itself) and no
// rank died or froze on its own; then *why_none (when given) says what was set aside (ranks
// that were told to terminate, or that died while the job finished), else stays empty.
std::vector<proto::Incident> Attribute(const AttributionInput& input, std::string* why_none = nullptr);

// Whether the collection window opened by the first event may close now: true once
// hang_window_ms has passed since the first event, or once every member of every involved
// communicator has a report observed at or after the first event (dead/exited ranks excepted).
// Involved: the comms of timeout events, all comms of ranks that raised other events, and,
// transitively, the comms on which members with such reports are waiting. True when there
// are no events.
bool WindowCanClose(const AttributionInput& input, int64_t hang_window_ms);

}  // namespace ft::master

#endif  // FT_FTMASTER_ATTRIBUTION_H_

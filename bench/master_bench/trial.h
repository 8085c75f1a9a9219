// master_bench: one trial: a fresh redis-server, the synthetic job written into it, the real
// ftmaster started against it, the hang injected, and the figures measured once the incident
// is written. Runs on main's thread; everything it starts it also stops.
//
// Per size and trial: a private redis-server on loopback (password, free port); synthetic
// workers (this process) that write what ftworker writes, encoded by proto/codec.h — membership
// once, every rank's progress table every 200 ms, summaries and worker heartbeats every second;
// the real `ftmaster run` against it. After a steady period (the master's CPU is measured over
// it) one rank stops before collective s of its tp communicator; its tp peers wait in s, the
// rest of the job backs up behind them (dp allreduces and pipeline p2p), and the waiting ranks
// raise timeout events once their wait passes the published timeout. The trial ends when the
// incident is in ft:{J}:incidents; it must name the stopped rank.
//
// Figures per trial (Unix ms on one host: Redis stamps stream ids with the same clock):
//   window_ms = window_closed_unix_ms (a field of the incident) - the first event's time: the
//     collection window, up to FT_HANG_WINDOW, plus the master's latency in noticing it may
//     close. RESULT window_ms. The first event's time is its unix_ms, or when it reached Redis
//     (its stream id) if later: the synthetic workers share this machine and fall behind at
//     131k ranks; how late they wrote it is printed per trial.
//   decide_ms = the incident's stream id ms - its window_closed_unix_ms, the start of the
//     master tick that found the window closed, so this covers that tick's last
//     progress/membership read, WindowCanClose, Attribute, Decide and the incident write.
//     RESULT decide_ms.
//   e2e_ms = the incident's stream id ms - the first event's time: what an operator waits
//     after the first timeout event (window_ms + decide_ms). RESULT e2e_ms.
//   incident decide_ms = decided_unix_ms - first_event_unix_ms (the field ftmaster writes):
//     e2e_ms without the incident's write.
// cpu_pct is the master's utime+stime (/proc/<pid>/stat) over the steady period, as % of one
// core; decision_cpu over first event → incident written is printed alongside.
//
// Pinning: with two CPUs or more, ftmaster runs alone on the last CPU; this driver and
// redis-server share the others, so "on one core" is what is measured. Real workers run on
// other hosts; here they share the machine, which makes the figures pessimistic.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>

#include "bench/master_bench/layout.h"
#include "bench/master_bench/options.h"

namespace ft::bench {

struct Trial {
  double window_ms = NAN;          // first event → window closed (RESULT window_ms)
  double close_to_written = NAN;   // window closed → incident written (RESULT decide_ms)
  double first_to_written = NAN;   // first event → incident written (RESULT e2e_ms)
  double field_decide_ms = NAN;    // the incident's decide_ms
  double open_to_decided = NAN;    // window opened (master log) → decided tick
  double steady_cpu_pct = NAN;
  double decision_cpu_pct = NAN;
  size_t events = 0;
  double others_pct = NAN;         // other processes' CPU during the trial, % of one core
  double event_late_ms = NAN;      // the first event reached Redis this long after its time
  // The stopped rank's first table observed after the first event was in Redis this long after
  // the first event (the window cannot close before).
  double stopped_table_ms = NAN;
  std::string incident_id;
  // Over the steady period, per shard's master ("a/b/c"; one figure for a single server):
  // INFO stats' total_net_input_bytes and total_commands_processed per second; and the sum.
  std::string shard_bytes_s, shard_commands_s;
  double input_bytes_s = NAN;
};

// Trial number `trial` (from 0) of a job shaped `layout`; prints its `bench: ranks=...` line,
// and the profile after it when `profile`. A trial that fails ends the bench with the master's
// log tail.
Trial RunTrial(const Options& o, const Layout& layout, int trial, bool profile);

}  // namespace ft::bench

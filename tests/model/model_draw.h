// One schedule's draw: the job's shape and settings and the faults with their moments, all from
// one seed (std::mt19937_64), so a seed is the whole schedule: rerun it with --seed K --trace.
#ifndef FT_TESTS_MODEL_MODEL_DRAW_H_
#define FT_TESTS_MODEL_MODEL_DRAW_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ft::model {

enum class FaultKind {
  kKill,           // SIGKILL of one rank; the launcher tears the rest down (SIGTERM) and relaunches
  kFailingExit,    // one rank exits with status 1 (an uncaught exception); the same teardown
  kPreempt,        // SIGTERM to every rank at once; relaunched after the delay
  kDelayReports,   // one worker's Redis writes held back (its outbox keeps them) for a while
  kWorkerRestart,  // one ftworker ends and a new one starts (plan file removed or left, reports sent again)
  kMasterFailover, // the leading ftmaster loses Redis for good; the standby takes the lease
  kKillDuringRecovery,  // a second SIGKILL shortly after the relaunch (a fault during recovery)
};
const char* FaultName(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::kKill;
  int64_t at_ms = 0;       // schedule time; for kKillDuringRecovery: after the relaunch
  int rank = -1;           // the rank it hits (kill, failing exit, second kill)
  std::string node;        // the node it hits (delay, worker restart)
  int64_t length_ms = 0;   // delay: how long; worker restart: how long no worker runs
  bool clean = true;       // worker restart: the old worker removed its plan file
  // Where in the step it lands: 0 anywhere; 1 inside the rank's update window; 2 between steps.
  int moment = 0;
};

struct Draw {
  uint64_t seed = 0;
  int dp = 2, tp = 1;
  int nodes = 2;
  int ranks_per_node = 1;
  bool sharded = false;        // every rank its own shard (sharded optimizer state)
  int periodic_every = 0;      // K: a periodic save every K steps (0: off)
  int64_t step_ms = 1000;      // one training step
  int64_t update_ms = 200;     // its optimizer update window, at the step's end
  int64_t save_ms = 50;        // a save's copy into the arena
  int64_t relaunch_delay_ms = 0;
  int64_t teardown_grace_ms = 10000;  // the launcher's SIGTERM -> SIGKILL
  std::vector<Fault> faults;   // in time order (kKillDuringRecovery last)

  int world() const { return dp * tp; }
  std::string Describe() const;
};

Draw MakeDraw(uint64_t seed);

}  // namespace ft::model

#endif  // FT_TESTS_MODEL_MODEL_DRAW_H_

// One schedule, run: the real MasterLoop (two of them, one standby, on FakeStores) over one
// FakeRedis, the model's workers (model_worker.h) and job (model_job.h), the launcher (a rank's
// end tears the others down with SIGTERM and relaunches every rank in place after the drawn
// delay, as torchrun does), and the draw's faults at their moments — all on one fake clock
// advanced 50 ms a tick. What happened is returned as facts for the invariants (model_check.h).
#ifndef FT_TESTS_MODEL_MODEL_RUN_H_
#define FT_TESTS_MODEL_MODEL_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tests/model/model_draw.h"
#include "tests/model/model_job.h"

namespace ft::model {

// What a relaunch had to restore, taken when the fault that ended the launch before it came.
struct LaunchFacts {
  int launch = 0;
  std::string cause;              // the fault ("kill", "preempt", ...; "unplanned" when none of ours)
  int64_t newest_whole = 0;       // the newest step every shard held whole (0: none)
  int64_t newest_reached = 0;     // the newest ft_step_done of any rank
  bool preempted = false;
};

struct StopCommand {
  std::string id;
  std::string node;
  bool incident_found = false;    // its incident is in ft:{J}:incidents
};

struct RunFacts {
  std::vector<RestoreRecord> restores;
  std::vector<LaunchFacts> launches;  // one per launch after the first
  int last_launch = 0;
  bool settled = false;               // the last launch restored and trained on
  int faults_fired = 0;
  bool incident_fault = false;        // the draw has a fault that ends ranks
  std::vector<StopCommand> stops;
  std::vector<std::string> incidents; // "kind id"
  std::vector<std::string> leftovers; // plan files left after every worker stopped cleanly
  int64_t final_plan_step = -1;
  std::string final_plan_settling;
  int64_t simulated_ms = 0;
};

// `trace`: every event of the schedule, for a person (--trace); null: none kept.
RunFacts RunSchedule(const Draw& draw, const std::string& plan_dir, std::vector<std::string>* trace);

}  // namespace ft::model

#endif  // FT_TESTS_MODEL_MODEL_RUN_H_

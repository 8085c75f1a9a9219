// The invariants checked after every schedule (issue 28, item 6), as far as the model sees:
//   I1 every rank of a launch restored one step S, or none (plan step -1, the master's word),
//      and the last launch restored on every rank: a failed or mixed restore breaks it;
//   I2 a restored copy's digest is TrueDigest(S, shard): the state of an uninterrupted run;
//   I3 S >= the newest step every shard held whole when the fault came (copies of this launch's
//      lineage); after a preemption also S >= the newest step reached - 1;
//   I4 every stop command names an incident that is in ft:{J}:incidents, and a schedule whose
//      faults end no rank sees no stop and no relaunch;
//   I5 no plan file outlives the workers' clean stop (the model's arenas live in memory and
//      Redis's documented retention is not modelled: those are left to layer (b)).
// I1 and I2 count as wrong_restores, I3 as lost_beyond_bound, I4 as false_stops, I5 as leftovers.
#ifndef FT_TESTS_MODEL_MODEL_CHECK_H_
#define FT_TESTS_MODEL_MODEL_CHECK_H_

#include <string>
#include <vector>

#include "tests/model/model_draw.h"
#include "tests/model/model_run.h"

namespace ft::model {

struct Violation {
  std::string invariant;  // "I1".."I5"
  std::string text;
};

struct Counts {
  int wrong_restores = 0, lost_beyond_bound = 0, false_stops = 0, leftovers = 0;
  void Add(const std::vector<Violation>& violations);
  bool zero() const { return wrong_restores + lost_beyond_bound + false_stops + leftovers == 0; }
};

std::vector<Violation> Check(const Draw& draw, const RunFacts& facts);

}  // namespace ft::model

#endif  // FT_TESTS_MODEL_MODEL_CHECK_H_

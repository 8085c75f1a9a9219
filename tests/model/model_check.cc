#include "tests/model/model_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "tests/model/model_arena.h"

namespace ft::model {

void Counts::Add(const std::vector<Violation>& violations) {
  for (const Violation& v : violations) {
    if (v.invariant == "I1" || v.invariant == "I2") ++wrong_restores;
    if (v.invariant == "I3") ++lost_beyond_bound;
    if (v.invariant == "I4") ++false_stops;
    if (v.invariant == "I5") ++leftovers;
  }
}

std::vector<Violation> Check(const Draw& draw, const RunFacts& facts) {
  std::vector<Violation> out;
  std::map<int, std::vector<const RestoreRecord*>> by_launch;
  for (const RestoreRecord& r : facts.restores) by_launch[r.launch].push_back(&r);
  for (const auto& [launch, records] : by_launch) {
    std::map<int64_t, std::vector<int>> steps;  // restored step -> ranks
    bool all_ok = true;
    for (const RestoreRecord* r : records) {
      if (!r->done) {
        all_ok = false;
        if (launch == facts.last_launch) {
          out.push_back({"I1", fmt::format("launch {}: rank {} never finished ft_restore", launch, r->rank)});
        }
        continue;
      }
      if (!r->ok) {
        all_ok = false;
        out.push_back({"I1", fmt::format("launch {}: rank {}'s ft_restore failed: {}", launch, r->rank, r->why)});
        continue;
      }
      steps[r->step].push_back(r->rank);
      if (r->step >= 0) {
        const int shard = draw.sharded ? r->rank : r->rank % draw.tp;
        if (r->digest != TrueDigest(r->step, shard)) {
          out.push_back({"I2", fmt::format("launch {}: rank {} restored step {} with digest {:016x}, an uninterrupted "
                                           "run's is {:016x}", launch, r->rank, r->step, r->digest,
                                           TrueDigest(r->step, shard))});
        }
      }
    }
    if (steps.size() > 1) {
      std::string mix;
      for (const auto& [step, ranks] : steps) mix += fmt::format(" step {}: ranks {};", step, fmt::join(ranks, ","));
      out.push_back({"I1", fmt::format("launch {}: the ranks restored different steps:{}", launch, mix)});
    }
    if (!all_ok || steps.size() != 1) continue;
    const int64_t restored = std::max<int64_t>(steps.begin()->first, 0);
    for (const LaunchFacts& f : facts.launches) {
      if (f.launch != launch) continue;
      if (restored < f.newest_whole) {
        out.push_back({"I3", fmt::format("launch {} (after {}) restored {}, but step {} was whole on every shard "
                                         "when the fault came", launch, f.cause,
                                         restored == 0 ? std::string("nothing") : fmt::format("step {}", restored),
                                         f.newest_whole)});
      }
      if (f.preempted && restored < f.newest_reached - 1) {
        out.push_back({"I3", fmt::format("launch {} (after a preemption) restored step {}, more than one behind step "
                                         "{} reached", launch, restored, f.newest_reached)});
      }
    }
  }
  if (!facts.settled) out.push_back({"I1", "the last launch did not restore and train on within the time limit"});
  for (const StopCommand& s : facts.stops) {
    if (!s.incident_found) out.push_back({"I4", fmt::format("stop command {} to {} names no incident", s.id, s.node)});
  }
  if (!facts.incident_fault) {
    if (!facts.stops.empty()) {
      out.push_back({"I4", fmt::format("{} stop command(s) in a schedule whose faults end no rank (incidents: {})",
                                       facts.stops.size(), fmt::join(facts.incidents, "; "))});
    }
    if (!facts.launches.empty()) {
      out.push_back({"I4", fmt::format("ranks ended ({}) in a schedule whose faults end none", facts.launches[0].cause)});
    }
  }
  for (const std::string& path : facts.leftovers) out.push_back({"I5", "plan file left after the workers stopped: " + path});
  return out;
}

}  // namespace ft::model

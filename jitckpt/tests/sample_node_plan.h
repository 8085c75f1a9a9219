// A restore plan file's value with every field set (ranks with several sources, one with none,
// a path with a space), shared by the plan file's tests and its fuzz target.
#ifndef FT_JITCKPT_TESTS_SAMPLE_NODE_PLAN_H_
#define FT_JITCKPT_TESTS_SAMPLE_NODE_PLAN_H_

#include "jitckpt/node_plan.h"

namespace ft::ckpt::testing {

inline NodePlan SamplePlan() {
  NodePlan plan;
  plan.job = "job-a";
  plan.node = "node-1.cluster";
  plan.version = 12;
  plan.step = 1200;
  plan.arena_dir = "/dev/shm";
  plan.local_dir = "/var/lib/ft ckpt";  // paths may hold spaces
  plan.remote_dir = "/mnt/shared/ckpt";
  plan.ranks = {
      {0, 0x0123456789abcdefull, {{0, "node-1.cluster", {"arena", "local", "remote"}}, {4, "node-2", {"remote"}}}},
      {3, 0xfedcba9876543210ull, {{3, "node-1.cluster", {"prefetched"}}, {7, "node-2", {"arena"}}}},
      {4, 0x0123456789abcdefull, {}},
  };
  return plan;
}

}  // namespace ft::ckpt::testing

#endif  // FT_JITCKPT_TESTS_SAMPLE_NODE_PLAN_H_

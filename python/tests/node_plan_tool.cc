// node_plan_tool: writes the restore plan file ftworker would write (jitckpt/node_plan.h) for
// ranks whose own arenas hold a committed copy, so tests and benchmarks can drive ft_restore
// without ftworker, Redis and ftmaster. Each rank's line names its own arena as the one
// verified source, with the digest read from that arena's manifest.
//
//   node_plan_tool --arena-dir D --job J --node N --ranks 0[,1...] (--step S | --none)
//                  [--tiers arena[,local,remote]] [--local-dir P] [--remote-dir P] [--wait-s T]
//
// --wait-s: how long to wait for each arena to hold a committed copy of step S (a periodic
// save commits after ft_step_done returned). Prints one line per rank: "rank R digest X".
// Exit 0 written, 1 no such copy in time, 2 bad arguments.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/node_plan.h"

namespace {

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "node_plan_tool: %s\nusage: node_plan_tool --arena-dir D --job J --node N --ranks 0[,1...] "
               "(--step S | --none) [--tiers arena,local,remote] [--local-dir P] [--remote-dir P] [--wait-s T]\n",
               why);
  return 2;
}

// The committed manifest of `rank`'s arena once it holds `step`, waiting up to wait_s.
ft::Status WaitForStep(const std::string& path, int64_t step, double wait_s, ft::ckpt::Manifest* m) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  ft::Status last = ft::Status::NotFound("no arena " + path);
  for (;;) {
    ft::ckpt::Arena arena;
    last = ft::ckpt::Arena::OpenForRead(path, &arena);
    if (last.ok()) {
      uint64_t generation = 0;
      last = arena.ReadCommitted(m, &generation);
      if (last.ok() && m->step == step) return ft::Status::Ok();
      if (last.ok()) last = ft::Status::NotFound("arena holds step " + std::to_string(m->step));
    }
    if (std::chrono::steady_clock::now() >= deadline) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int main(int argc, char** argv) {
  ft::ckpt::NodePlan plan;
  std::vector<int> ranks;
  std::vector<std::string> tiers = {"arena"};
  bool none = false;
  double wait_s = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--none") {
      none = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(("missing value of " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--arena-dir") plan.arena_dir = v;
    else if (a == "--job") plan.job = v;
    else if (a == "--node") plan.node = v;
    else if (a == "--step") plan.step = std::strtoll(v.c_str(), nullptr, 10);
    else if (a == "--local-dir") plan.local_dir = v;
    else if (a == "--remote-dir") plan.remote_dir = v;
    else if (a == "--tiers") tiers = Split(v);
    else if (a == "--wait-s") wait_s = std::strtod(v.c_str(), nullptr);
    else if (a == "--ranks") {
      for (const std::string& r : Split(v)) ranks.push_back(std::atoi(r.c_str()));
    } else {
      return Usage(("unknown flag " + a).c_str());
    }
  }
  if (plan.arena_dir.empty() || plan.job.empty() || plan.node.empty()) return Usage("--arena-dir, --job, --node needed");
  if (none == (plan.step >= 0)) return Usage("give exactly one of --step S and --none");
  plan.version = 1;
  if (none) plan.step = -1;
  for (int rank : ranks) {
    if (none) break;  // a plan without a step names no ranks
    ft::ckpt::PlanRank line;
    line.rank = rank;
    {
      ft::ckpt::Manifest m;
      const std::string path = ft::ckpt::Arena::PathFor(plan.arena_dir, plan.job, rank);
      const ft::Status s = WaitForStep(path, plan.step, wait_s, &m);
      if (!s.ok()) {
        std::fprintf(stderr, "node_plan_tool: rank %d: no committed step %lld in %s: %s\n", rank,
                     static_cast<long long>(plan.step), path.c_str(), s.ToString().c_str());
        return 1;
      }
      line.digest = ft::ckpt::ContentDigest(m);
      line.sources.push_back(ft::ckpt::PlanSource{rank, plan.node, tiers});
      std::printf("rank %d digest %s\n", rank, ft::ckpt::DigestHex(line.digest).c_str());
    }
    plan.ranks.push_back(line);
  }
  const std::string out = ft::ckpt::NodePlanPath(plan.arena_dir, plan.job, plan.node);
  const ft::Status s = ft::ckpt::WriteNodePlan(out, plan);
  if (!s.ok()) {
    std::fprintf(stderr, "node_plan_tool: %s: %s\n", out.c_str(), s.ToString().c_str());
    return 1;
  }
  std::printf("plan %s\n", out.c_str());
  return 0;
}

// master_bench (make bench-master): how fast the real ftmaster decides a hang at 1k, 4k, 16k and
// 131k ranks, and what it costs in CPU while the job runs.
//
// main owns the flags' checks, the loop over sizes and trials, the per-size medians and the
// RESULT lines. The parts, each in its own file here:
//   options.h         the command line
//   layout.h          the synthetic job's tp x dp x pp shape and communicators
//   value_template.h  values encoded once and re-rendered with new numbers
//   synthetic_job.h   what the job's workers write to Redis, running and hung
//   worker_driver.h   when they write it
//   master_process.h  the real ftmaster as a child process
//   cpu_usage.h       pinning and CPU accounting
//   trial.h           one trial end to end, and what its figures mean
//   profile.h         the decision's steps timed in-process
//   redis_backend.h   one redis-server or a 3-shard Redis Cluster, and each shard's input
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/master_bench/common.h"
#include "bench/master_bench/cpu_usage.h"
#include "bench/master_bench/layout.h"
#include "bench/master_bench/options.h"
#include "bench/master_bench/trial.h"

extern char** environ;

namespace ft::bench {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A program name as execvp would find it, or "" when it would not.
std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  char buf[8192] = {};
  std::string path = confstr(_CS_PATH, buf, sizeof(buf)) > 0 ? buf : "/usr/bin:/bin";
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  }
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string full = (dir.empty() ? "." : dir) + "/" + name;
    if (access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

}  // namespace
}  // namespace ft::bench

int main(int argc, char** argv) {
  using namespace ft::bench;
  const Options o = ParseOptions(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (access(o.ftmaster.c_str(), X_OK) != 0) {
    Die(fmt::format("ftmaster not found at {}: build it (make build, or cmake --build <build> "
                    "--target ftmaster) or pass --ftmaster PATH", o.ftmaster));
  }
  if (FindProgram(o.redis_server).empty()) {
    Die(fmt::format("{} not found: install redis-server (scripts/install-deps.sh) or pass "
                    "--redis-server PATH", o.redis_server));
  }
  PinDriver(o.pin);
  std::printf("bench: ftmaster %s, %s, %s, %d CPUs (%s), FT_HANG_WINDOW=%s, %d trials per size, "
              "timeout events from %s\n",
              o.ftmaster.c_str(),
              o.cluster ? "a Redis Cluster of 3 masters + 3 replicas" : "one redis-server",
              o.every_report ? "workers write every report (before issue 19)"
                             : "workers write what changed; in a window the ranks it names",
              CpuCount(),
              o.pin && CpuCount() >= 2 ? "ftmaster pinned alone to the last" : "unpinned",
              o.hang_window.c_str(), o.trials,
              o.all_events ? "every waiting rank" : "the stopped rank's tp peers");
  std::fflush(stdout);

  std::vector<std::string> results;
  const char* writes = o.every_report ? "every-report" : "paced";
  for (int n : o.ranks) {
    const Layout layout = Layout::ForRanks(n);
    std::vector<double> window, decide, field, first, steady, decision, others, input;
    std::vector<std::string> shard_bytes, shard_commands;
    for (int trial = 0; trial < o.trials; ++trial) {
      const Trial t = RunTrial(o, layout, trial, o.profile && trial == o.trials - 1);
      window.push_back(t.window_ms);
      decide.push_back(t.close_to_written);
      field.push_back(t.field_decide_ms);
      first.push_back(t.first_to_written);
      steady.push_back(t.steady_cpu_pct);
      decision.push_back(t.decision_cpu_pct);
      others.push_back(t.others_pct);
      input.push_back(t.input_bytes_s);
      shard_bytes.push_back(t.shard_bytes_s);
      shard_commands.push_back(t.shard_commands_s);
    }
    // The shards' rates of the trial whose total input is the median one.
    size_t mid = 0;
    for (size_t i = 0; i < input.size(); ++i) {
      if (std::fabs(input[i] - Median(input)) < std::fabs(input[mid] - Median(input))) mid = i;
    }
    std::printf("bench: ranks=%d (%s): medians of %d: window_ms=%.0f, decide_ms=%.0f, "
                "e2e_ms=%.0f, incident decide_ms=%.0f, master cpu %.1f%% steady / %.1f%% "
                "deciding; steady Redis input %.1f MB/s (%.0f B per rank per second; %s: %s "
                "B/s, %s commands/s); other processes %.0f%% of a core\n",
                n, layout.Describe().c_str(), o.trials, Median(window), Median(decide),
                Median(first), Median(field), Median(steady), Median(decision),
                Median(input) / 1e6, Median(input) / n,
                o.cluster ? "per shard's master" : "one server", shard_bytes[mid].c_str(),
                shard_commands[mid].c_str(), Median(others));
    if (Median(others) > 25) {
      std::printf("bench: warning: other processes used %.0f%% of a core during the trials of "
                  "ranks=%d; on a 2-CPU machine that is the noise of these figures: run again "
                  "when the machine is idle\n", Median(others), n);
    }
    std::fflush(stdout);
    if (o.cluster) {
      results.push_back(fmt::format(
          "RESULT master_cluster ranks={} window_ms={:.0f} decide_ms={:.0f} cluster_e2e_ms={:.0f} "
          "cpu_pct={:.1f} shard_write_bytes_s={} shard_commands_s={} writes={}",
          n, Median(window), Median(decide), Median(first), Median(steady), shard_bytes[mid],
          shard_commands[mid], writes));
    } else {
      results.push_back(fmt::format(
          "RESULT master ranks={} window_ms={:.0f} decide_ms={:.0f} e2e_ms={:.0f} cpu_pct={:.1f} "
          "write_bytes_s={:.0f} writes={}",
          n, Median(window), Median(decide), Median(first), Median(steady), Median(input), writes));
    }
  }
  for (const std::string& line : results) std::printf("%s\n", line.c_str());
  return 0;
}

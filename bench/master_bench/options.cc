// master_bench: the flags, their usage text and their defaults; see options.h.
#include "bench/master_bench/options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "bench/master_bench/common.h"
#include "bench/master_bench/layout.h"

namespace ft::bench {
namespace {

constexpr const char* kUsage =
    "usage: master_bench [--ftmaster PATH] [--redis-server PATH] [--ranks 1024,4096,16384,131072]\n"
    "                    [--trials 5] [--steady-s 3] [--hang-window 1s] [--events peers|all]\n"
    "                    [--no-profile] [--no-pin] [--log-level info] [--keep-logs DIR] [--cluster]\n"
    "                    [--every-report]\n"
    "Drives the real ftmaster with synthetic workers through a private redis-server and prints\n"
    "RESULT master ranks=<N> window_ms=.. decide_ms=.. e2e_ms=.. cpu_pct=.. per size (medians;\n"
    "bench/README.md).\n"
    "  --ftmaster PATH     default: ../ftmaster/ftmaster next to this program\n"
    "  --events peers|all  which waiting ranks raise timeout events: the stopped rank's tp\n"
    "                      peers (default), or every rank that waits on it\n"
    "  --no-profile        skip the in-process timing of the decision's steps\n"
    "  --no-pin            do not put ftmaster alone on the last CPU\n"
    "  --keep-logs DIR     keep each trial's ftmaster log there\n"
    "  --cluster           run against a private Redis Cluster (3 masters + 3 replicas on\n"
    "                      loopback) instead of one redis-server: RESULT master_cluster ...,\n"
    "                      with each shard's input rate (shard_write_bytes_s=a/b/c)\n"
    "  --every-report      the synthetic workers write every table every report and every\n"
    "                      summary every second (as before issue 19), not only what changed\n";

std::string DefaultFtmaster() {
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "ftmaster";
  std::string dir(self, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));            // <build>/bench
  return dir.substr(0, dir.rfind('/')) + "/ftmaster/ftmaster";
}

}  // namespace

Options ParseOptions(int argc, char** argv) {
  Options o;
  o.ftmaster = DefaultFtmaster();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(arg + " needs a value (try --help)");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--ftmaster") {
      o.ftmaster = value();
    } else if (arg == "--redis-server") {
      o.redis_server = value();
    } else if (arg == "--ranks") {
      o.ranks.clear();
      std::stringstream ss(value());
      std::string part;
      while (std::getline(ss, part, ',')) {
        const int n = std::atoi(part.c_str());
        if (n < 2 * kTp || n % kTp != 0) {
          Die(fmt::format("--ranks: '{}' must be a multiple of {} and at least {}", part, kTp,
                          2 * kTp));
        }
        o.ranks.push_back(n);
      }
    } else if (arg == "--trials") {
      o.trials = std::max(1, std::atoi(value().c_str()));
    } else if (arg == "--steady-s") {
      o.steady_s = std::max(0.5, std::atof(value().c_str()));
    } else if (arg == "--hang-window") {
      o.hang_window = value();
    } else if (arg == "--events") {
      const std::string v = value();
      if (v != "peers" && v != "all") Die("--events takes peers or all");
      o.all_events = v == "all";
    } else if (arg == "--no-profile") {
      o.profile = false;
    } else if (arg == "--no-pin") {
      o.pin = false;
    } else if (arg == "--log-level") {
      o.log_level = value();
    } else if (arg == "--cluster") {
      o.cluster = true;
    } else if (arg == "--every-report") {
      o.every_report = true;
    } else if (arg == "--keep-logs") {
      o.keep_logs = value();
    } else {
      Die("unknown argument '" + arg + "' (try --help)");
    }
  }
  return o;
}

}  // namespace ft::bench

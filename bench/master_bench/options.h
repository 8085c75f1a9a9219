// master_bench: the command line: what a run measures and where it finds its programs.
// Parsed once in main; read-only after that.
#pragma once

#include <string>
#include <vector>

namespace ft::bench {

struct Options {
  std::string ftmaster;
  std::string redis_server = "redis-server";
  std::vector<int> ranks = {1024, 4096, 16384, 131072};
  int trials = 5;
  double steady_s = 3;
  std::string hang_window = "1s";
  bool all_events = false;  // every waiting rank raises its timeout, not only the tp peers
  bool profile = true;
  bool pin = true;
  bool cluster = false;     // a 3-shard Redis Cluster instead of one redis-server
  bool every_report = false;  // the workers' writes before issue 19 (worker_driver.h)
  std::string log_level = "info";
  std::string keep_logs;
};

// Exits: after printing the usage for --help, with a message for a bad argument.
Options ParseOptions(int argc, char** argv);

}  // namespace ft::bench

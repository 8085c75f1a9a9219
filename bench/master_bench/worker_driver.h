// master_bench: the synthetic workers' clocks: when each node's worker writes what
// SyntheticJob renders, and sending it to Redis. Used by the trial's one thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "bench/master_bench/common.h"
#include "bench/master_bench/synthetic_job.h"
#include "redis/store.h"

namespace ft::bench {

// Sends `commands` in one pipeline; any error reply ends the bench, naming `what`.
void Pipeline(redis::Commands& db, const std::vector<redis::Argv>& commands, std::string_view what);

// The workers' clocks: each node's worker writes its ranks' progress every 200 ms, their
// summaries and its heartbeat every second. Real workers are independent processes, so their
// phases are spread evenly over the period rather than all writing at once.
class Driver {
 public:
  Driver(SyntheticJob* job, redis::Commands* db, int64_t now);

  // Everything at once (before the master starts: the state a running job has in Redis).
  void WriteAll(int64_t now);

  void Tick(int64_t now);
  void SetHung() { hung_ = true; }
  // The longest one tick's writes took (they delay the next events by as much).
  double max_write_ms() const { return max_write_ms_; }

  // The progress writes of `rank`'s node are recorded from now on: when each table was
  // observed (the time it carries) and when its write was answered (it was in Redis).
  struct Written {
    int64_t observed_unix_ms = 0;
    int64_t in_redis_unix_ms = 0;
  };
  void Watch(int rank);
  const std::vector<Written>& watched() const { return watched_; }

 private:
  SyntheticJob* job_;
  redis::Commands* db_;
  bool hung_ = false;
  std::vector<int64_t> next_progress_, next_summary_;
  double max_write_ms_ = 0;
  int watch_node_ = -1;
  std::vector<Written> watched_;
};

// Sleeps to the next driver tick.
void Pace(Clock::time_point* next);

}  // namespace ft::bench

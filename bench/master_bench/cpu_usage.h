// master_bench: CPUs: how many there are, who runs where, and how much a process (or everything
// else on the machine) used. Reads /proc; any thread.
#pragma once

#include <sys/types.h>

#include <utility>
#include <vector>

#include "bench/master_bench/common.h"

namespace ft::bench {

int CpuCount();

// The master alone on the last CPU; the driver and redis-server (its child) on the others.
void PinDriver(bool pin);

// utime + stime of a process, in seconds.
double CpuSeconds(pid_t pid);

// The CPU other programs used during a trial, in % of one core: on a shared 2-CPU machine the
// noise under the figures. Machine-wide busy time (/proc/stat, which also counts processes
// that came and went in between) minus this process and its children (ftmaster,
// redis-server; live ones from /proc, reaped ones from rusage) and minus kernel threads
// (ksoftirqd and kworkers carry the loopback traffic of the bench itself).
class OtherLoad {
 public:
  OtherLoad();

  double Pct() const;

 private:
  static double MachineBusy();
  // This process and its children; kernel threads' own figures into *kthreads.
  static double Ours(std::vector<std::pair<pid_t, double>>* kthreads);

  Clock::time_point start_;
  double total_;
  std::vector<std::pair<pid_t, double>> kthreads_;
  double ours_;
};

}  // namespace ft::bench

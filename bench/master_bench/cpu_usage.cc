// master_bench: CPU counts, pinning and accounting from /proc; see cpu_usage.h.
#include "bench/master_bench/cpu_usage.h"

#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace ft::bench {

int CpuCount() { return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))); }

void PinDriver(bool pin) {
  const int cpus = CpuCount();
  if (!pin || cpus < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = 0; c + 1 < cpus; ++c) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    std::fprintf(stderr, "master_bench: sched_setaffinity failed (%s); running unpinned\n",
                 std::strerror(errno));
  }
}

double CpuSeconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return NAN;
  std::stringstream ss(text.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && ss >> field; ++i) {
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

OtherLoad::OtherLoad() : start_(Clock::now()), total_(MachineBusy()), ours_(Ours(&kthreads_)) {}

double OtherLoad::Pct() const {
  std::vector<std::pair<pid_t, double>> kthreads;
  const double ours = Ours(&kthreads);
  double kernel = 0;
  for (const auto& [pid, cpu] : kthreads) {
    double before = 0;
    for (const auto& [p, c] : kthreads_) {
      if (p == pid) before = c;
    }
    kernel += cpu - before;
  }
  const double other = (MachineBusy() - total_) - (ours - ours_) - kernel;
  // The counters tick at different granularities: ±10% of a core is noise, not load.
  return std::max(0.0, other / (MsSince(start_) / 1000) * 100);
}

double OtherLoad::MachineBusy() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double total = 0, v = 0;
  stat >> cpu;
  for (int i = 0; i < 8 && stat >> v; ++i) {
    if (i != 3 && i != 4) total += v;  // all but idle and iowait
  }
  return total / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double OtherLoad::Ours(std::vector<std::pair<pid_t, double>>* kthreads) {
  kthreads->clear();
  const pid_t self = getpid();
  // Children already reaped (the trial's ftmaster once stopped) count through rusage.
  rusage reaped = {};
  getrusage(RUSAGE_CHILDREN, &reaped);
  double ours = CpuSeconds(self) + static_cast<double>(reaped.ru_utime.tv_sec) +
                static_cast<double>(reaped.ru_stime.tv_sec) +
                static_cast<double>(reaped.ru_utime.tv_usec + reaped.ru_stime.tv_usec) / 1e6;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return ours;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == self) continue;
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::stringstream ss(text.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    ss >> state >> ppid;
    if (ppid == self) ours += CpuSeconds(pid);
    if (ppid == 2 || pid == 2) kthreads->emplace_back(pid, CpuSeconds(pid));
  }
  closedir(proc);
  return ours;
}

}  // namespace ft::bench

// master_bench: clocks and failing; see common.h.
#include "bench/master_bench/common.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace ft::bench {

int64_t UnixMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "master_bench: %s\n", message.c_str());
  std::fflush(stderr);
  std::exit(1);
}

void Check(const Status& s, std::string_view doing) {
  if (!s.ok()) Die(fmt::format("{}: {}", doing, s.ToString()));
}

}  // namespace ft::bench

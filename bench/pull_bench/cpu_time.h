// CPU seconds the two sides of a transfer used (user + system, every thread): this process by
// getrusage, the server process by /proc/<pid>/stat (10 ms ticks). On a machine shared with other
// work, CPU per byte says where a transfer's cost goes more steadily than wall seconds do.
#ifndef FT_BENCH_PULL_BENCH_CPU_TIME_H_
#define FT_BENCH_PULL_BENCH_CPU_TIME_H_

#include <sys/types.h>

namespace ft::bench {

class CpuMeter {
 public:
  explicit CpuMeter(pid_t server);  // starts measuring
  double client_s() const;          // since the start
  double server_s() const;

 private:
  pid_t server_;
  double client0_;
  double server0_;
};

}  // namespace ft::bench

#endif  // FT_BENCH_PULL_BENCH_CPU_TIME_H_

// ft::worker::KernelStats: one rank's kernel launches and sampled kernel durations over a
// summary window, from libft.so's kKernelName / kKernelHandle / kKernelCount / kKernelSample
// records (shm/records.h). Names are resolved as the records arrive: a sample names its
// kernel by host stub (cudaLaunchKernel*) or by the cudaKernel_t handle nvcc's launches pass,
// which kKernelHandle maps to the stub. Bounded: at most kMaxKernels names and handles, at
// most kMaxWindowKernels kernels and kMaxSamples durations each per window.
// Not thread-safe: owned by its RankMonitor.
#ifndef FT_FTWORKER_KERNEL_STATS_H_
#define FT_FTWORKER_KERNEL_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/messages.h"
#include "shm/ring.h"

namespace ft::worker {

class KernelStats {
 public:
  static constexpr size_t kMaxKernels = 4096;
  static constexpr size_t kMaxWindowKernels = 64;
  static constexpr size_t kMaxSamples = 256;

  // True when the record was one of the kernel records (and taken).
  bool OnRecord(const shm::Record& r);

  // The window's launches and per-kernel samples (sorted by name); starts a new window.
  uint64_t TakeLaunches();
  std::vector<proto::KernelSummary> TakeSamples();

 private:
  std::string NameOf(uint64_t kernel) const;

  std::unordered_map<uint64_t, std::string> names_;     // host stub -> device name head
  std::unordered_map<uint64_t, uint64_t> handles_;      // cudaKernel_t -> host stub
  uint64_t window_launches_ = 0;
  struct Window {
    std::vector<double> ms;
    uint64_t count = 0;
    double max_ms = 0;
  };
  std::map<std::string, Window> window_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_KERNEL_STATS_H_

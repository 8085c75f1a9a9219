#include "violation.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "config.h"

namespace gpusim::nccl {
namespace {

std::atomic<uint64_t> g_count{0};
std::mutex g_mu;
char g_last[512] = "";  // GUARDED_BY(g_mu)

}  // namespace

void Violation(const char* fn, const void* comm, const char* what) {
  char line[512];
  int n = std::snprintf(line, sizeof line,
                        "gpusim-nccl[%d]: NCCL usage violation: %s on communicator %p %s "
                        "(undefined behaviour in NCCL)\n",
                        static_cast<int>(getpid()), fn, comm, what);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    std::snprintf(g_last, sizeof g_last, "%s", line);
  }
  g_count.fetch_add(1, std::memory_order_acq_rel);
  ssize_t ignored = write(STDERR_FILENO, line, n > 0 && n < static_cast<int>(sizeof line)
                                                   ? static_cast<size_t>(n)
                                                   : std::strlen(line));
  (void)ignored;
  if (LoadConfig().abort_on_violation) std::abort();
}

}  // namespace gpusim::nccl

extern "C" __attribute__((visibility("default"))) uint64_t gpusimNcclViolationCount() {
  return gpusim::nccl::g_count.load(std::memory_order_acquire);
}

extern "C" __attribute__((visibility("default"))) const char* gpusimNcclLastViolation() {
  std::lock_guard<std::mutex> lock(gpusim::nccl::g_mu);
  return gpusim::nccl::g_last;
}

// Error reporting: the per-thread last error, names and strings, and the "not simulated"
// answer of the weak stubs (stubs.cc is generated from the headers at configure time).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "runtime.h"

namespace gpusim {
namespace {

// Like CUDA's: each host thread has its own last error.
thread_local cudaError_t t_last_error = cudaSuccess;

}  // namespace

cudaError_t Ret(cudaError_t e) {
  if (e != cudaSuccess && e != cudaErrorNotReady) t_last_error = e;
  return e;
}

void Warn(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "gpusim: %s\n", buf);
}

// The body of every generated weak stub: an entry point the real runtime has and gpusim does
// not simulate. GPUSIM_VERBOSE=1 names each one once, to find what a program is missing.
int Unsupported(const char* name) {
  static const bool verbose = [] {
    const char* v = getenv("GPUSIM_VERBOSE");
    return v && *v && *v != '0';
  }();
  if (verbose) {
    static auto* mu = new std::mutex;
    static auto* seen = new std::set<std::string>;
    std::lock_guard<std::mutex> lk(*mu);
    if (seen->insert(name).second) Warn("%s is not simulated (returns cudaErrorNotSupported)", name);
  }
  return Ret(cudaErrorNotSupported);
}

}  // namespace gpusim

using namespace gpusim;

GPUSIM_API cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

GPUSIM_API cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

GPUSIM_API const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define GPUSIM_ERROR(code, str) \
  case code:                    \
    return #code;
#include "error_table.inc"
#undef GPUSIM_ERROR
    default:
      return "unrecognized error code";
  }
}

GPUSIM_API const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
#define GPUSIM_ERROR(code, str) \
  case code:                    \
    return str;
#include "error_table.inc"
#undef GPUSIM_ERROR
    default:
      return "unrecognized error code";
  }
}

#include "faults.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace trainsim {

namespace {

// A store to a page mapped without access: a real SIGSEGV, from a well-defined program (a null
// store would be undefined behaviour the compiler may drop, and UBSan reports instead).
[[noreturn]] void Segfault() {
  void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page != MAP_FAILED) *static_cast<volatile int*>(page) = 1;
  raise(SIGSEGV);  // not reached unless mmap failed
  std::abort();
}

// A long stretch of host-side work with no CUDA or NCCL call, like an evaluation on the CPU or
// a checkpoint being serialized: the process stays busy (its CPU time advances), which is what
// tells a pause apart from a hang. A sleeping pause would look exactly like a host hang.
void HostWork(double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<uint64_t> buffer(1 << 16, 1);
  volatile uint64_t sink = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    uint64_t h = sink;
    for (uint64_t& v : buffer) h = (h ^ (v += h)) * 0x100000001b3ull;
    sink = h;
  }
}

}  // namespace

void InjectHostFault(const Config& c, int rank) {
  switch (c.fault) {
    case FaultKind::kHangHost:
      for (;;) pause();  // like a dataloader that never returns; signals still end the process
    case FaultKind::kCrashKill:
      raise(SIGKILL);
      break;
    case FaultKind::kCrashSegv:
      Segfault();
    case FaultKind::kCrashAbort:
      std::abort();
    case FaultKind::kPause:
      HostWork(c.pause_s);
      std::fprintf(stderr, "trainsim rank=%d: pause over, resuming\n", rank);
      break;
    case FaultKind::kHangKernel:
    case FaultKind::kSlow:
    case FaultKind::kNone:
      break;
  }
}

}  // namespace trainsim

#include "faults.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

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
      std::this_thread::sleep_for(std::chrono::duration<double>(c.pause_s));
      std::fprintf(stderr, "trainsim rank=%d: pause over, resuming\n", rank);
      break;
    case FaultKind::kHangKernel:
    case FaultKind::kSlow:
    case FaultKind::kNone:
      break;
  }
}

}  // namespace trainsim

#include "faults.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    case FaultKind::kExit:
      std::fflush(nullptr);
      std::exit(0);
    case FaultKind::kFail:
      std::fprintf(stderr, "trainsim rank=%d: error: injected failure (as an uncaught exception)\n", rank);
      std::fflush(nullptr);
      std::exit(1);
    case FaultKind::kPause:
      HostWork(c.pause_s);
      std::fprintf(stderr, "trainsim rank=%d: pause over, resuming\n", rank);
      break;
    case FaultKind::kHangKernel:
    case FaultKind::kSlow:
    case FaultKind::kSdc:
    case FaultKind::kNone:
      break;
  }
}

bool FlipParameterBit(float v, float* flipped, int* bit) {
  if (!(v >= 2.0f && v < 256.0f) || v != static_cast<float>(static_cast<int>(v))) return false;
  uint32_t word = 0;
  std::memcpy(&word, &v, sizeof(word));
  const int exponent = static_cast<int>((word >> 23) & 0xff) - 127;  // 1..7 for [2, 256)
  *bit = 23 - exponent;  // the mantissa bit of weight 2^0
  word ^= uint32_t{1} << *bit;
  std::memcpy(flipped, &word, sizeof(word));
  return true;
}

}  // namespace trainsim

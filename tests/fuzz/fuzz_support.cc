// The counters and the violation report shared by both drivers of a fuzz target.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/fuzz/fuzz_target.h"

namespace ft::fuzz {
namespace {
uint64_t g_accepted = 0;
uint64_t g_rejected = 0;
}  // namespace

void Accepted() { ++g_accepted; }
void Rejected() { ++g_rejected; }
uint64_t AcceptedCount() { return g_accepted; }
uint64_t RejectedCount() { return g_rejected; }

// Set by the replayer before each input (replay_main.cc); null under libFuzzer.
void (*g_on_violation)() = nullptr;

void Violation(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "fuzz: contract broken at %s:%d: %s\n", file, line, what.c_str());
  if (g_on_violation != nullptr) g_on_violation();
  std::abort();
}

void Refused(const Status& status) {
  FT_FUZZ_CHECK(!status.message().empty(), "an error without a message");
  FT_FUZZ_CHECK(status.code() == StatusCode::kCorrupt || status.code() == StatusCode::kUnsupported,
                "unexpected code: " + status.ToString());
  Rejected();
}

std::vector<uint64_t> AlignedCopy(const uint8_t* data, size_t size) {
  std::vector<uint64_t> words((size + 7) / 8 + 1, 0);
  if (size > 0) std::memcpy(words.data(), data, size);
  return words;
}

}  // namespace ft::fuzz

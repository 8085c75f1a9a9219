// The contract between a parser's fuzz target and whatever drives it: libFuzzer (make fuzz, clang)
// or the corpus replayer every `make test` runs (replay_main.cc). A target is one .cc in
// targets/ that defines
//
//   extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
//   ft::fuzz::TargetInfo FuzzTargetInfo();
//
// The first parses one input and checks the parser's contract with FT_FUZZ_CHECK (an error has
// a message and one of the codes a caller handles, the output is untouched on failure, what
// parses re-encodes to itself); it reports each parse with Accepted() or Rejected(). The second
// gives the replayer the valid encodings to mutate, the mutator's tuning for the format, and how
// many of the mutations must parse and fail for the run to count (a mutator that stopped
// reaching the parser's deep checks, or a parser that stopped refusing, fails it).
#ifndef FT_TESTS_FUZZ_FUZZ_TARGET_H_
#define FT_TESTS_FUZZ_FUZZ_TARGET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tests/util/mutate.h"

namespace ft::fuzz {

struct TargetInfo {
  std::string name;
  std::vector<std::string> seeds;     // valid encodings: each must be accepted
  test_util::MutateOptions mutate;    // the format's tuning of the one mutator
  size_t random_max_bytes = 256;      // random inputs, sometimes behind random_start
  std::string random_start;
  bool random_rejected = false;       // every random input must be refused (a format with a
                                      // checksum or a strict grammar)
  int mutations = 20000;              // per replay run (each of a random kind one time in ten)
  uint64_t min_accepted = 0;          // Accepted() calls the mutations must reach
  uint64_t min_rejected = 0;          // Rejected() calls
};

void Accepted();
void Rejected();
uint64_t AcceptedCount();
uint64_t RejectedCount();

// A parser's refusal as the contract wants it — a message, and a code a caller handles
// (kCorrupt, or kUnsupported for a newer format) — counted as Rejected.
void Refused(const Status& status);

// A contract broken: says where and what, then aborts (libFuzzer keeps the input as a crash;
// the replayer prints which input it was and where it saved it).
[[noreturn]] void Violation(const char* file, int line, const std::string& what);

// The input as a parser of binary formats expects it: 8-byte aligned, whatever the driver's
// buffer (a header read through a struct must not be misaligned for UBSan).
std::vector<uint64_t> AlignedCopy(const uint8_t* data, size_t size);

}  // namespace ft::fuzz

#define FT_FUZZ_CHECK(condition, what)                                            \
  do {                                                                           \
    if (!(condition)) ::ft::fuzz::Violation(__FILE__, __LINE__, (what));         \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
ft::fuzz::TargetInfo FuzzTargetInfo();

#endif  // FT_TESTS_FUZZ_FUZZ_TARGET_H_

// eu-stack's text and faulthandler's dump are written by other processes (the dump by the rank
// itself): mutated and random inputs never crash the parsers, and their summaries stay bounded.
#include <gtest/gtest.h>

#include "ftworker/stacks/python_stack.h"
#include "ftworker/stacks/stack_capture.h"
#include "tests/util/mutate.h"

namespace ft::worker {
namespace {

constexpr const char* kEuStack =
    "PID 4242 - process\nTID 4242:\n#0  0x00007f837672ebd3 pause\n#1  0x000055912c1e73f2 main\n"
    "TID 4243:\n#0  0x00007f0000000001 __futex_abstimed_wait_common\n";
constexpr const char* kFaulthandler =
    "Thread 0x00007f85f113f640 (most recent call first):\n"
    "  File \"/x/train.py\", line 41 in wait_for_batch\n"
    "  File \"/x/train.py\", line 138 in main\n"
    "  File \"/x/train.py\", line 153 in <module>\n\n"
    "Current thread 0x00007f85e0000640 (most recent call first):\n"
    "  File \"/usr/lib/python3/threading.py\", line 320 in wait\n";

TEST(StackTextFuzzTest, MutatedStacksNeverCrashAndStayBounded) {
  test_util::MutateOptions options;
  options.tokens = {"TID ", "#0 ", " 0x", "\n", "Thread 0x", "Current thread ", "  File \"", "\", line ", " in ",
                    "(most recent call first):"};
  test_util::Mutator m(7, options);
  for (int i = 0; i < 20000; ++i) {
    const std::string eu = i % 10 == 0 ? m.RandomBytes(512, "TID ") : m.Mutate(kEuStack);
    std::vector<StackThread> threads = ParseEuStack(eu);
    EXPECT_LE(SummarizeStacks(threads, 4242).size(), 4000u + 64);
    const std::string py = i % 10 == 0 ? m.RandomBytes(512, "Thread ") : m.Mutate(kFaulthandler);
    EXPECT_LE(SummarizePythonDump(py).size(), 4000u);
  }
  EXPECT_NE(SummarizePythonDump(kFaulthandler).find("wait_for_batch (train.py:41) <- main (train.py:138)"),
            std::string::npos)
      << SummarizePythonDump(kFaulthandler);
  EXPECT_EQ(SummarizePythonDump(kFaulthandler).rfind("python thread 0x00007f85f113f640:", 0), 0u)
      << "the script's main thread first";
}

}  // namespace
}  // namespace ft::worker

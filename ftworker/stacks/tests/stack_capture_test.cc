#include "ftworker/stacks/stack_capture.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace ft::worker {
namespace {

// What eu-stack 0.188 prints for a stopped two-thread process.
constexpr const char* kRecorded =
    "PID 4242 - process\n"
    "TID 4243:\n"
    "#0  0x00007f0000000001 __futex_abstimed_wait_common\n"
    "#1  0x00007f0000000002 pthread_cond_wait@@GLIBC_2.3.2\n"
    "TID 4242:\n"
    "#0  0x00007f837672ebd3 pause\n"
    "#1  0x000055912c1e73f2 ft::trainsim::InjectHostFault(ft::trainsim::Config const&, int)\n"
    "#2  0x000055912c1e8aba\n"
    "#3  0x000055912c1d41ea main\n";

TEST(StackCaptureTest, ParsesThreadsAndFramesAndPutsTheMainThreadFirst) {
  std::vector<StackThread> threads = ParseEuStack(kRecorded);
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[1].tid, 4242);
  ASSERT_EQ(threads[1].frames.size(), 4u);
  EXPECT_EQ(threads[1].frames[0], "pause");
  EXPECT_EQ(threads[1].frames[2], "??");
  const std::string summary = SummarizeStacks(threads, 4242);
  EXPECT_EQ(summary.rfind("tid 4242: pause <- ft::trainsim::InjectHostFault(", 0), 0u) << summary;
  EXPECT_NE(summary.find("<- main\ntid 4243: __futex_abstimed_wait_common"), std::string::npos) << summary;
}

TEST(StackCaptureTest, TheSummaryIsBounded) {
  std::vector<StackThread> many(200, StackThread{1, std::vector<std::string>(40, std::string(300, 'f'))});
  const std::string summary = SummarizeStacks(many, 1, 12, 4000);
  EXPECT_LE(summary.size(), 4000u + 40);
  EXPECT_NE(summary.find("more threads"), std::string::npos);
  EXPECT_TRUE(ParseEuStack("garbage\n#0 0x\nTID x\n").size() <= 1);
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

__attribute__((noinline)) void WaitHereForTheStackTest() {
  for (;;) pause();
}

// A stopped child (SIGSTOP, as a frozen rank) is read without being resumed, and names the
// function it waits in.
TEST(StackCaptureTest, ReadsAStoppedProcessWithoutResumingIt) {
  if (system("command -v eu-stack >/dev/null 2>&1") != 0) {
    FAIL() << "eu-stack is not installed: install elfutils (scripts/install-deps.sh)";
  }
  pid_t child = fork();
  if (child == 0) WaitHereForTheStackTest();
  ASSERT_GT(child, 0);
  usleep(100000);
  kill(child, SIGSTOP);
  std::unique_ptr<StackCapture> capture;
  ASSERT_TRUE(StackCapture::Start("eu-stack", child, NowNs(), &capture).ok());
  std::string summary;
  Status s;
  const uint64_t deadline = NowNs() + 10'000'000'000ull;
  while (!capture->Poll(NowNs(), &summary, &s) && NowNs() < deadline) usleep(10000);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_NE(summary.find("WaitHereForTheStackTest"), std::string::npos) << summary;
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WNOHANG | WUNTRACED), child) << "still stopped";
  EXPECT_TRUE(WIFSTOPPED(status));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(StackCaptureTest, AMissingToolOrProcessIsAClearError) {
  std::unique_ptr<StackCapture> capture;
  EXPECT_FALSE(StackCapture::Start("/nonexistent/eu-stack", 1, NowNs(), &capture).ok());
  if (system("command -v eu-stack >/dev/null 2>&1") != 0) return;  // said by the test above
  ASSERT_TRUE(StackCapture::Start("eu-stack", 999999999, NowNs(), &capture).ok());
  std::string summary;
  Status s;
  while (!capture->Poll(NowNs(), &summary, &s)) usleep(10000);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("999999999"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ft::worker

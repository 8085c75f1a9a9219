#include "ftworker/monitor/exit_event.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <string>

namespace ft::worker {
namespace {

constexpr int64_t kEndUnixMs = 1'700'000'000'000;

// A rank gone without a clean exit whose zombie's status the worker read: `wait_status` as
// waitpid(2) reports it; `term`: the signal libft.so recorded (0: none).
proto::Event EndOf(int wait_status, int32_t term = 0) {
  proto::Event e;
  e.kind = "exit";
  e.unix_ms = kEndUnixMs;
  if (term != 0) e.terminated_by_signal = term;
  DescribeEnd(RankEnd{2, 4242, proto::RankState::kDead, 0, term, false, wait_status}, &e);
  return e;
}

int KilledBy(int sig) { return sig; }  // waitpid's status of a process a signal killed (no core)

TEST(ExitEventTest, ASignalThatAsksAProcessToEndIsATeardownThoughLibftDidNotRecordIt) {
  ASSERT_TRUE(WIFSIGNALED(KilledBy(SIGTERM)));
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    proto::Event e = EndOf(KilledBy(sig));
    EXPECT_FALSE(e.clean) << sig;
    EXPECT_EQ(e.code, -sig);
    EXPECT_EQ(e.terminated_by_signal, sig);
    EXPECT_EQ(e.terminate_unix_ms, kEndUnixMs);
    EXPECT_NE(e.message.find("which asks a process to end: a teardown"), std::string::npos) << e.message;
  }
}

TEST(ExitEventTest, AKillOrACrashSignalStaysAFailure) {
  for (int sig : {SIGKILL, SIGSEGV, SIGABRT, SIGBUS}) {
    proto::Event e = EndOf(KilledBy(sig));
    EXPECT_EQ(e.code, -sig);
    EXPECT_EQ(e.terminated_by_signal, 0) << sig;
    EXPECT_EQ(e.terminate_unix_ms, 0) << sig;
    EXPECT_NE(e.message.find("was killed by signal " + std::to_string(sig)), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find("teardown"), std::string::npos) << e.message;
  }
}

// What libft.so recorded is said as before, and keeps its own time.
TEST(ExitEventTest, ASignalLibftRecordedIsSaidAsBefore) {
  proto::Event e = EndOf(KilledBy(SIGTERM), SIGTERM);
  EXPECT_EQ(e.terminated_by_signal, SIGTERM);
  EXPECT_EQ(e.terminate_unix_ms, 0);  // RankMonitor sets it from the segment
  EXPECT_NE(e.message.find("it had been told to terminate by signal 15"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace ft::worker

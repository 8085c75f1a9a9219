// A fork() while another thread is inside libft.so's sigaction (its signal table lock held):
// the child has only the forking thread, so a lock copied held would never be released and the
// child's first sigaction would spin for ever. libft.so takes the lock around fork()
// (pthread_atfork) so the child always gets it free. CTest preload.fork_signal_lock.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

void Nothing(int) {}

// Waits up to `limit` for `pid`; kills it when it did not end (a child spinning).
bool EndsWithin(pid_t pid, std::chrono::milliseconds limit, int* status) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (waitpid(pid, status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  waitpid(pid, status, 0);
  return false;
}

TEST(ForkSignalLock, AChildForkedWhileAnotherThreadSetsAHandlerCanSetOne) {
  std::atomic<bool> stop{false};
  std::thread setter([&] {
    struct sigaction act {};
    act.sa_handler = Nothing;
    sigemptyset(&act.sa_mask);
    while (!stop.load(std::memory_order_relaxed)) sigaction(SIGUSR2, &act, nullptr);
  });
  int stuck = 0;
  for (int i = 0; i < 300 && stuck == 0; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      struct sigaction act {};
      act.sa_handler = Nothing;
      sigemptyset(&act.sa_mask);
      sigaction(SIGUSR1, &act, nullptr);
      _exit(0);
    }
    int status = 0;
    if (!EndsWithin(pid, std::chrono::milliseconds(5000), &status)) {
      ++stuck;
    } else {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    }
  }
  stop.store(true);
  setter.join();
  EXPECT_EQ(stuck, 0) << "a forked child never returned from sigaction (fork " << stuck << ")";
}

}  // namespace

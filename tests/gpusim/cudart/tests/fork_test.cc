// fork(): worker threads do not survive it; the child must keep using the runtime (streams
// made before the fork included) instead of deadlocking on the parent's state.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

// LeakSanitizer (FT_SANITIZE builds): the child below leaks a hung stream on purpose.
extern "C" void __lsan_disable() __attribute__((weak));

namespace gpusim_test {
namespace {

int ChildBody(cudaStream_t old_stream, int* dev) {
  alarm(10);  // a deadlock kills the child, and the parent sees it
  Flag f;
  if (cudaLaunchHostFunc(old_stream, Flag::Set, &f) != cudaSuccess) return 10;
  if (cudaStreamSynchronize(old_stream) != cudaSuccess || !f.value) return 11;
  int v = 9;
  if (cudaMemcpy(dev, &v, sizeof v, cudaMemcpyHostToDevice) != cudaSuccess) return 12;
  int back = 0;
  if (cudaMemcpy(&back, dev, sizeof back, cudaMemcpyDeviceToHost) != cudaSuccess) return 13;
  if (back != 9) return 14;
  cudaStream_t fresh;
  if (cudaStreamCreate(&fresh) != cudaSuccess) return 15;
  if (cudaLaunchHostFunc(fresh, Flag::Set, &f) != cudaSuccess) return 16;
  if (cudaDeviceSynchronize() != cudaSuccess) return 17;
  return 0;
}

// ThreadSanitizer refuses to start threads in the child of a multi-threaded process.
#ifdef __SANITIZE_THREAD__
#define MAYBE_SKIP() GTEST_SKIP() << "fork is not supported under ThreadSanitizer"
#else
#define MAYBE_SKIP() (void)0
#endif

TEST(Fork, ChildKeepsWorkingWhileParentStreamIsHeld) {
  MAYBE_SKIP();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int* dev;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(int)), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  gate.WaitEntered();  // fork while the parent's worker is blocked in a host function
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(ChildBody(s, dev));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's stream is unaffected.
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  gate.Open();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaFree(dev);
  cudaStreamDestroy(s);
}

TEST(Fork, ExitDoesNotWaitForAHungStream) {
  MAYBE_SKIP();
  // A child whose stream never finishes must still exit promptly.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (__lsan_disable) __lsan_disable();
    alarm(10);
    auto* never = new Gate;  // leaked: its destructor would open it
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaLaunchHostFunc(s, Gate::Fn, never);
    cudaLaunchHostFunc(0, Gate::Fn, never);
    exit(3);  // runs static destructors and atexit handlers
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 3);
}

}  // namespace
}  // namespace gpusim_test

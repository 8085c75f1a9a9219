#include "harness.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpusim_test {

int g_rank = -1;

void ChildFail(const char* file, int line, const char* expr, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[rank %d pid %d] %s:%d: CHECK failed: %s %s\n", g_rank, getpid(), file,
               line, expr, msg);
  std::fflush(stderr);
  _exit(3);
}

double NowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

double ProcessCpuS() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

ncclUniqueId NewId() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) std::abort();
  return id;
}

std::vector<int> RunRanks(int n, double timeout_s, const std::function<void(int rank)>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      g_rank = r;
      // Die with the parent (a killed test must not leave ranks behind).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      body(r);
      std::fflush(stdout);
      _exit(0);
    }
    pids.push_back(pid);
  }
  std::vector<int> outcome(static_cast<size_t>(n), -1);
  int remaining = n;
  const double deadline = NowS() + timeout_s;
  while (remaining > 0 && NowS() < deadline) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] == 0) continue;
      int status = 0;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == pids[r]) {
        outcome[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[r] = 0;
        --remaining;
      }
    }
    if (remaining > 0) usleep(2000);
  }
  for (int r = 0; r < n; ++r) {
    if (pids[r] == 0) continue;
    std::fprintf(stderr, "rank %d (pid %d) did not finish in %.0f s: killing it\n", r, pids[r],
                 timeout_s);
    kill(pids[r], SIGKILL);
    waitpid(pids[r], nullptr, 0);
  }
  return outcome;
}

void ExpectAllOk(const std::vector<int>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_EQ(outcomes[r], 0) << "rank " << r
                              << (outcomes[r] == -1 ? " timed out" : " failed (see stderr)");
  }
}

namespace {
std::string Prefix() { return "gpusim-nccl-test" + std::to_string(getpid()) + "-"; }
}  // namespace

std::vector<std::string> OurSegments() {
  std::vector<std::string> out;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return out;
  const std::string p = Prefix();
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, p.c_str(), p.size()) == 0) out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

void NcclTest::SetUp() {
  setenv("GPUSIM_NCCL_SHM_PREFIX", ("/" + Prefix()).c_str(), 1);
  unsetenv("GPUSIM_NCCL_STALL");
  unsetenv("GPUSIM_NCCL_CHUNK_BYTES");
  unsetenv("GPUSIM_NCCL_INIT_TIMEOUT_S");
}

void NcclTest::TearDown() {
  std::vector<std::string> left = OurSegments();
  for (const std::string& s : left) shm_unlink(("/" + s).c_str());
  if (expect_no_leftover_segments_) {
    EXPECT_TRUE(left.empty()) << left.size() << " shared-memory segment(s) leaked, e.g. /dev/shm/"
                              << (left.empty() ? "" : left.front());
  }
}

}  // namespace gpusim_test

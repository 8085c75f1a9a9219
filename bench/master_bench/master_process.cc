// master_bench: forking, pinning and stopping ftmaster, and reading its log; see
// master_process.h.
#include "bench/master_bench/master_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "bench/master_bench/common.h"
#include "bench/master_bench/cpu_usage.h"

extern char** environ;

namespace ft::bench {

Status Master::Start(const Options& o, const std::string& job, const std::string& url,
                     const std::string& password, const Layout& layout,
                     const std::string& log_path) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    // The caller's FT_* settings would change what is measured; the bench sets its own.
    if (std::strncmp(*e, "FT_", 3) != 0) env.emplace_back(*e);
  }
  env.push_back("FT_REDIS_PASSWORD=" + password);
  env.push_back("FT_HANG_WINDOW=" + o.hang_window);
  env.push_back("FT_LOG_LEVEL=" + o.log_level);
  std::vector<std::string> args = {o.ftmaster, "run", "--job", job, "--redis", url,
                                   "--topology", layout.Describe(), "--order", "tp-dp-pp",
                                   "--id", "master-bench"};
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "creating " + log_path);
  const int cpus = CpuCount();
  const bool pin = o.pin && cpus >= 2;
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) {
    close(fd);
    return Status::FromErrno(errno, "fork for ftmaster");
  }
  if (pid_ == 0) {
    // A bench that dies (a failed check exits at once) takes its master along; otherwise
    // it would retry a vanished Redis forever.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    if (pin) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus - 1, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "master_bench: exec %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(fd);
  log_path_ = log_path;
  return Status::Ok();
}

bool Master::Exited(int* status) {
  if (pid_ <= 0) return true;
  if (waitpid(pid_, status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

void Master::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(Ms(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string Master::LogTail(size_t bytes) const {
  std::ifstream in(log_path_);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

int64_t LogLineMs(const std::string& path, std::string_view needle) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) == std::string::npos || line.size() < 24) continue;
    struct tm tm = {};
    if (strptime(line.substr(0, 19).c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) continue;
    return static_cast<int64_t>(timegm(&tm)) * 1000 + std::atoi(line.substr(20, 3).c_str());
  }
  return -1;
}

}  // namespace ft::bench

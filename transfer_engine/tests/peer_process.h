// A transfer_peer child process for the multi-process tests: started with flags, its port read
// from its first line of output, killed (SIGKILL, also when stopped) and reaped at the end.
#ifndef FT_TRANSFER_ENGINE_TESTS_PEER_PROCESS_H_
#define FT_TRANSFER_ENGINE_TESTS_PEER_PROCESS_H_

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ft::rdma::testing {

class PeerProcess {
 public:
  // Starts `program` with `args`; port() is 0 when it did not come up.
  PeerProcess(const std::string& program, const std::vector<std::string>& args) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(program.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(program.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out[0], POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[64];
      ssize_t n = read(out[0], buf, sizeof(buf));
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    close(out[0]);
    if (line.rfind("PORT ", 0) == 0) port_ = static_cast<uint16_t>(std::atoi(line.c_str() + 5));
  }
  ~PeerProcess() { Kill(); }
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

  // The state letter of /proc/<pid>/stat: 'T' when stopped, 'Z'/'X' when dead, '?' if gone.
  char State() const {
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    size_t paren = all.rfind(')');
    return paren == std::string::npos || paren + 2 >= all.size() ? '?' : all[paren + 2];
  }

  // Kills and reaps; returns the wait status (or the one reaped earlier).
  int Kill() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status_, 0);
      reaped_ = true;
    }
    return status_;
  }
  // Reaps without killing: true when it had already exited, with its wait status.
  bool Exited(int* status) {
    if (reaped_) {
      *status = status_;
      return true;
    }
    if (waitpid(pid_, &status_, WNOHANG) == pid_) {
      reaped_ = true;
      *status = status_;
      return true;
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace ft::rdma::testing

#endif  // FT_TRANSFER_ENGINE_TESTS_PEER_PROCESS_H_

#include "bench/pull_bench/server_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

extern char** environ;

namespace ft::bench {

bool ServerProcess::Start(const std::string& self, const std::vector<std::string>& args, const std::string& secret,
                          std::string* why) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::vector<std::string> argv_s{self, "serve"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out[1]);
  stdin_fd_ = in[1];
  if (rc != 0) {
    close(out[0]);
    pid_ = -1;
    *why = "spawn " + self + ": " + std::strerror(rc);
    return false;
  }
  const std::string line = secret + "\n";
  if (write(stdin_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    close(out[0]);
    *why = "the server process took no secret";
    return false;
  }
  FILE* from = fdopen(out[0], "r");
  char buf[512] = {};
  const bool got = from != nullptr && std::fgets(buf, sizeof(buf), from) != nullptr;
  if (from != nullptr) std::fclose(from);  // the server prints nothing after its ready line
  ready_line_ = got ? buf : "";
  while (!ready_line_.empty() && ready_line_.back() == '\n') ready_line_.pop_back();
  std::istringstream words(ready_line_);
  std::string word;
  words >> word;
  if (word != "ready") {
    *why = "the server process did not start (see its message above)";
    return false;
  }
  while (words >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "engine_port") engine_port_ = static_cast<uint16_t>(std::stoul(value));
    if (key == "socket_port") socket_port_ = static_cast<uint16_t>(std::stoul(value));
    if (key == "region") region_ = value;
  }
  if (engine_port_ == 0 || socket_port_ == 0 || region_.empty()) {
    *why = "unexpected ready line: " + ready_line_;
    return false;
  }
  return true;
}

bool ServerProcess::Stop() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
  if (pid_ < 0) return true;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace ft::bench

#include "redis/tests/redis_server.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/loopback_port.h"

namespace ft::redis::testing {

int UnusedPort() { return FreeLoopbackPort(); }

int UnusedPortWithClusterBus() {
  // Redis listens for its cluster bus on port + 10000 and refuses a port above 55535. The
  // kernel's port 0 comes from the ephemeral range (32768-60999 by default), a fifth of which
  // is too high, so draw below that range: both ports then stay clear of outgoing connections.
  std::random_device rd;
  std::uniform_int_distribution<int> pick(kClusterPortLow, kClusterPortHigh);
  for (int attempt = 0; attempt < 200; ++attempt) {
    int port = pick(rd);
    if (LoopbackPortIsFree(port) && LoopbackPortIsFree(port + kClusterBusOffset)) return port;
  }
  return 0;
}

namespace {

std::string RandomPassword() {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rd;
  std::string out = "pw-";
  for (int i = 0; i < 24; ++i) out += kChars[rd() % (sizeof(kChars) - 1)];
  return out;
}

}  // namespace

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)) {
  if (options_.require_password) {
    password_ = options_.password.empty() ? RandomPassword() : options_.password;
  }
  char dir[] = "/tmp/ft-redis-test-XXXXXX";
  if (mkdtemp(dir) != nullptr) dir_ = dir;
}

RedisServer::~RedisServer() {
  Stop();
  if (!dir_.empty()) {
    std::remove((dir_ + "/redis.log").c_str());
    std::remove((dir_ + "/nodes.conf").c_str());  // a cluster node's (--cluster-config-file)
    std::remove((dir_ + "/dump.rdb").c_str());    // a replica's full sync
    rmdir(dir_.c_str());
  }
}

Endpoint RedisServer::endpoint() const {
  Endpoint ep;
  ep.host = host_;
  ep.port = port_;
  ep.password = password_;
  return ep;
}

std::string RedisServer::url() const { return "redis://" + host_ + ":" + std::to_string(port_); }

std::string RedisServer::LogTail() const {
  std::ifstream in(dir_ + "/redis.log");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

Status RedisServer::Start() {
  if (running()) return Status::Ok();
  // Another process may take the port between UnusedPort() and the bind: try a few.
  Status s;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = options_.cluster_bus ? UnusedPortWithClusterBus() : UnusedPort();
    s = Launch();
    if (s.ok()) return s;
  }
  return s;
}

Status RedisServer::Restart() {
  Stop();
  // The port was ours a moment ago; Redis sets SO_REUSEADDR, so TIME_WAIT does not matter.
  Status s;
  for (int attempt = 0; attempt < 20; ++attempt) {
    s = Launch();
    if (s.ok()) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return s;
}

Status RedisServer::Launch() {
  if (dir_.empty()) return Status::IoError("no temporary directory for redis-server");
  std::vector<std::string> args = {options_.binary,
                                   "--port", std::to_string(port_),
                                   "--bind", host_,
                                   "--save", "",
                                   "--appendonly", "no",
                                   "--daemonize", "no",
                                   "--dir", dir_,
                                   "--logfile", dir_ + "/redis.log"};
  if (!password_.empty()) {
    args.insert(args.end(), {"--requirepass", password_});
  } else {
    args.insert(args.end(), {"--protected-mode", "no"});
  }
  if (!options_.acl_user.empty()) {
    args.insert(args.end(), {"--user", options_.acl_user, "on", ">" + options_.acl_password, "~*",
                             "&*", "+@all"});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status::FromErrno(errno, "fork for redis-server");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;

  Endpoint ep = endpoint();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Status last;
  while (std::chrono::steady_clock::now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Unavailable("redis-server on port " + std::to_string(port_) +
                                 " exited at start (status " + std::to_string(wstatus) +
                                 "): " + LogTail());
    }
    Client c;
    last = c.Connect(ep, std::chrono::milliseconds(500));
    if (last.ok()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Stop();
  return Status::Timeout("redis-server on port " + std::to_string(port_) +
                         " did not answer PING within 10 s: " + last.ToString());
}

void RedisServer::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace ft::redis::testing

#include "ftmaster/launch/embedded_redis.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "redis/client.h"
#include "redis/loopback_port.h"

namespace ft::master {
namespace {


Status RandomPassword(std::string* out) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open /dev/urandom");
  unsigned char bytes[24];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = read(fd, bytes + got, sizeof(bytes) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      close(fd);
      return Status::FromErrno(err, "read /dev/urandom");
    }
    got += static_cast<size_t>(n);
  }
  close(fd);
  std::string pw;
  for (unsigned char b : bytes) pw += fmt::format("{:02x}", b);
  *out = std::move(pw);
  return Status::Ok();
}

std::string Tail(const std::string& path, size_t max_bytes = 2000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > max_bytes) text = text.substr(text.size() - max_bytes);
  return text;
}

std::string Unquote(std::string v) {
  while (!v.empty() && (v.back() == '\r' || v.back() == ' ')) v.pop_back();
  if (v.size() >= 2 && ((v.front() == '"' && v.back() == '"') || (v.front() == '\'' && v.back() == '\''))) {
    v = v.substr(1, v.size() - 2);
  }
  return v;
}

}  // namespace

EmbeddedRedis::EmbeddedRedis(std::string binary) : binary_(std::move(binary)) {}

EmbeddedRedis::~EmbeddedRedis() { Stop(); }

redis::Endpoint EmbeddedRedis::endpoint() const {
  redis::Endpoint ep;
  ep.host = "127.0.0.1";
  ep.port = port_;
  ep.password = password_;
  return ep;
}

std::string EmbeddedRedis::url() const { return fmt::format("redis://127.0.0.1:{}", port_); }

Status EmbeddedRedis::Start() {
  if (running()) return Status::Ok();
  FT_RETURN_IF_ERROR(RandomPassword(&password_));
  if (dir_.empty()) {
    char dir[] = "/tmp/ftmaster-redis-XXXXXX";
    if (mkdtemp(dir) == nullptr) return Status::FromErrno(errno, "mkdtemp /tmp/ftmaster-redis-*");
    dir_ = dir;
  }
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = redis::FreeLoopbackPort();
    if (port == 0) return Status::IoError("no free loopback port for the embedded Redis");
    last = Launch(port);
    if (last.ok()) return last;
    Stop();
  }
  return last;
}

Status EmbeddedRedis::Launch(int port) {
  const std::string log = dir_ + "/redis.log";
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(pipefd[0]);
    close(pipefd[1]);
    return Status::FromErrno(err, "fork");
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(pipefd[0], 0);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    setpgid(0, 0);  // a terminal's Ctrl-C reaches ftmaster, which stops it in order
    execlp(binary_.c_str(), binary_.c_str(), "-", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipefd[0]);
  pid_ = pid;
  port_ = port;
  const std::string config = fmt::format(
      "bind 127.0.0.1\nport {}\nprotected-mode yes\nrequirepass {}\nsave \"\"\nappendonly no\n"
      "dir {}\ndaemonize no\nlogfile \"\"\n",
      port, password_, dir_);
  size_t off = 0;
  while (off < config.size()) {
    ssize_t n = write(pipefd[1], config.data() + off, config.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  close(pipefd[1]);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Unavailable(fmt::format(
          "the embedded redis-server ('{}') exited at start; is redis-server installed? its log:\n{}",
          binary_, Tail(log)));
    }
    redis::Client client;
    if (client.Connect(endpoint(), std::chrono::milliseconds(200)).ok()) {
      FT_LOG(Info, Master, "embedded Redis at {} (pid {}), loopback only, password-protected, "
             "no persistence", url(), pid_);
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Timeout(fmt::format("the embedded redis-server did not answer within 10 s; its "
                                     "log:\n{}", Tail(log)));
}

void EmbeddedRedis::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int wstatus = 0;
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
        gone = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (!gone) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &wstatus, 0);
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::remove((dir_ + "/redis.log").c_str());
    rmdir(dir_.c_str());
    dir_.clear();
  }
}

Status EmbeddedRedis::WriteEnvFile(const std::string& path) const {
  // The password goes into a file only its owner reads. The temporary name is created, never
  // opened as found: O_EXCL refuses a file someone planted there and O_NOFOLLOW a symlink
  // aimed at a file of theirs (or ours). Every step that could leave the secret readable or
  // half-written is an error.
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST || err == ELOOP) {
      return Status::IoError(fmt::format(
          "cannot create {}: it exists already ({}); a crashed ftmaster may have left it, or "
          "someone placed it there: check who owns it, remove it and start again",
          tmp, strerror(err)));
    }
    return Status::FromErrno(err, "create " + tmp);
  }
  auto fail = [&](int err, const std::string& what) {
    close(fd);
    unlink(tmp.c_str());
    return Status::FromErrno(err, what + " " + tmp + " (it would hold the Redis password)");
  };
  // The umask may only narrow 0600, but make the mode explicit.
  if (fchmod(fd, 0600) != 0) return fail(errno, "fchmod 0600");
  const std::string text =
      fmt::format("FT_REDIS={}\nFT_REDIS_PASSWORD={}\n", url(), password_);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(n < 0 ? errno : EIO, "write");
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail(errno, "fsync");
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Status::FromErrno(err, "close " + tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return Status::FromErrno(err, "rename to " + path);
  }
  return Status::Ok();
}

Status ReadEnvFile(const std::string& path, std::string* url, std::string* password,
                   std::string* user) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno, "open " + path);
  std::string line;
  std::string u, p, usr;
  bool any = false;
  while (std::getline(in, line)) {
    if (line.rfind("export ", 0) == 0) line = line.substr(7);
    const size_t eq = line.find('=');
    if (eq == std::string::npos || line.empty() || line[0] == '#') continue;
    const std::string key = line.substr(0, eq);
    const std::string value = Unquote(line.substr(eq + 1));
    if (key == "FT_REDIS") {
      u = value;
      any = true;
    } else if (key == "FT_REDIS_PASSWORD") {
      p = value;
    } else if (key == "FT_REDIS_USER") {
      usr = value;
    }
  }
  if (!any) return Status::InvalidArgument(fmt::format("{} has no FT_REDIS= line", path));
  *url = u;
  *password = p;
  *user = usr;
  return Status::Ok();
}

}  // namespace ft::master

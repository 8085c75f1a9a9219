// A real redis-server for tests: loopback only, a free port, a random password, no
// persistence, its files in a temporary directory. Stop() and Restart() (same port, same
// password, empty data) simulate an outage. The destructor kills it; so does the death of
// the test process (PR_SET_PDEATHSIG), so no server outlives a crashed test.
#ifndef FT_REDIS_TESTS_REDIS_SERVER_H_
#define FT_REDIS_TESTS_REDIS_SERVER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "redis/url.h"

namespace ft::redis::testing {

struct RedisServerOptions {
  std::string binary = "redis-server";
  bool require_password = true;  // --requirepass <random>
  std::string acl_user;          // when set: an ACL user with all rights and acl_password
  std::string acl_password;
  std::string password;                 // the password to require (empty: a random one)
  std::vector<std::string> extra_args;  // more redis-server options (--cluster-enabled yes ...)
  bool cluster_bus = false;             // a cluster node: its port + 10000 must be free too
};

class RedisServer {
 public:
  explicit RedisServer(RedisServerOptions options = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts on a free port and waits (up to 10 s) until it answers PING.
  Status Start();
  // Kills it (SIGKILL: an outage, not a shutdown) and waits for the process.
  void Stop();
  // Starts again on the same port after Stop().
  Status Restart();
  bool running() const { return pid_ > 0; }
  // SIGSTOP / SIGCONT: a server that accepts nothing and answers nothing (a hung host).
  void Pause();
  void Resume();

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  const std::string& password() const { return password_; }
  // The default user with the password.
  Endpoint endpoint() const;
  // "redis://127.0.0.1:<port>" (no password: that goes in FT_REDIS_PASSWORD).
  std::string url() const;
  // The server's log, for failure messages.
  std::string LogTail() const;

 private:
  Status Launch();

  RedisServerOptions options_;
  std::string host_ = "127.0.0.1";
  int port_ = 0;
  std::string password_;
  std::string dir_;
  pid_t pid_ = -1;
};

// A port nothing listens on (bound once, then released).
int UnusedPort();

// A cluster node's port: it and its bus port (+10000) are free, and it is at most 55535, the
// highest Redis accepts with --cluster-enabled. 0 when none was found.
inline constexpr int kClusterBusOffset = 10000;
inline constexpr int kClusterPortLow = 10000;
inline constexpr int kClusterPortHigh = 32767 - kClusterBusOffset;
int UnusedPortWithClusterBus();

}  // namespace ft::redis::testing

#endif  // FT_REDIS_TESTS_REDIS_SERVER_H_

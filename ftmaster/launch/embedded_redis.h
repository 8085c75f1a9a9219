// ft::master::EmbeddedRedis: the local redis-server `ftmaster run` starts when no Redis
// address is configured. Loopback only (bind 127.0.0.1, protected-mode yes), a free port, a
// random password from /dev/urandom, no persistence (save "", appendonly no). The
// configuration, password included, goes to the server on its stdin, so it appears in no
// process listing and no file. The server dies with ftmaster: Stop() (the destructor) kills
// it, and PR_SET_PDEATHSIG kills it if ftmaster dies any other way.
//
// WriteEnvFile() leaves `FT_REDIS=redis://127.0.0.1:<port>` and `FT_REDIS_PASSWORD=<pw>` in a
// file of mode 0600 for workers (`set -a; . FILE`). Not thread-safe.
#ifndef FT_FTMASTER_LAUNCH_EMBEDDED_REDIS_H_
#define FT_FTMASTER_LAUNCH_EMBEDDED_REDIS_H_

#include <sys/types.h>

#include <string>

#include "common/status.h"
#include "redis/url.h"

namespace ft::master {

class EmbeddedRedis {
 public:
  explicit EmbeddedRedis(std::string binary = "redis-server");
  ~EmbeddedRedis();
  EmbeddedRedis(const EmbeddedRedis&) = delete;
  EmbeddedRedis& operator=(const EmbeddedRedis&) = delete;

  // Starts the server and waits (up to 10 s) until it answers an authenticated PING.
  Status Start();
  // SIGTERM, then SIGKILL after a second; waits for it. Idempotent.
  void Stop();

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  const std::string& password() const { return password_; }
  redis::Endpoint endpoint() const;
  std::string url() const;  // without the password

  // Writes the env file (mode 0600, replaced atomically).
  Status WriteEnvFile(const std::string& path) const;

 private:
  Status Launch(int port);

  std::string binary_;
  int port_ = 0;
  std::string password_;
  std::string dir_;
  pid_t pid_ = -1;
};

// Reads FT_REDIS / FT_REDIS_PASSWORD / FT_REDIS_USER lines (shell syntax, as written by
// WriteEnvFile; `export ` prefixes and quotes tolerated) from `path`.
Status ReadEnvFile(const std::string& path, std::string* url, std::string* password,
                   std::string* user);

}  // namespace ft::master

#endif  // FT_FTMASTER_LAUNCH_EMBEDDED_REDIS_H_

// The measuring side's handle on the server process (`pull_bench serve`, server.h): started
// from this same executable, so the bytes really cross a process boundary as a peer's would;
// stopped by closing its stdin. Its stderr is the bench's.
#ifndef FT_BENCH_PULL_BENCH_SERVER_PROCESS_H_
#define FT_BENCH_PULL_BENCH_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ft::bench {

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess() { Stop(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Runs `self serve <args>`, hands it the secret and waits for its ready line.
  bool Start(const std::string& self, const std::vector<std::string>& args, const std::string& secret,
             std::string* why);
  pid_t pid() const { return pid_; }
  uint16_t engine_port() const { return engine_port_; }
  uint16_t socket_port() const { return socket_port_; }
  const std::string& region() const { return region_; }
  const std::string& ready_line() const { return ready_line_; }
  // Closes its stdin and waits for it; true when it exited 0.
  bool Stop();

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  uint16_t engine_port_ = 0;
  uint16_t socket_port_ = 0;
  std::string region_;
  std::string ready_line_;
};

}  // namespace ft::bench

#endif  // FT_BENCH_PULL_BENCH_SERVER_PROCESS_H_

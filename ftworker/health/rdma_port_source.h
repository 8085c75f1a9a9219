// ft::worker::health::RdmaPortSource: the RDMA ports' error counters and state from sysfs
// (<root>/class/infiniband/<dev>/ports/<port>/{counters,hw_counters}/<name>, state), as
// increases since the previous poll. The port list is rescanned every `rescan` (devices appear
// after a driver reload); each counter is one open/read per poll.
//
// Poll is called by one thread (the health sampler's).
#ifndef FT_FTWORKER_HEALTH_RDMA_PORT_SOURCE_H_
#define FT_FTWORKER_HEALTH_RDMA_PORT_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "proto/messages.h"

namespace ft::worker::health {

class RdmaPortSource {
 public:
  explicit RdmaPortSource(std::string sysfs_root, std::chrono::milliseconds rescan = std::chrono::seconds(10));

  // The signals since the previous poll; the first poll of a port is its baseline (a port
  // already down is reported then).
  std::vector<proto::HwSignal> Poll(int64_t unix_ms);
  size_t ports() const { return ports_.size(); }

 private:
  struct Port {
    std::string dir;                          // .../ports/<port>
    std::map<std::string, uint64_t> last;     // counter file (relative) -> value
    std::optional<bool> active;               // unknown until first read
  };
  void Rescan(int64_t unix_ms);

  const std::string root_;
  const int64_t rescan_ms_;
  int64_t next_rescan_ms_ = 0;
  std::map<std::string, Port> ports_;  // "mlx5_0/1" -> its state
  std::set<std::string> complained_;   // files said unreadable once
};

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_RDMA_PORT_SOURCE_H_

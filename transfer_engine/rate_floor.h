// ft::rdma::RateFloor: gives up a connection that delivers, but too slowly to finish.
//
// The socket's I/O timeout catches a peer that went silent. A peer that trickles (a failing
// NIC retransmitting, a host swapping, a link at a tenth of its speed) sends a few bytes before
// every timeout and would hold a restore for hours. So each connection of a pull also has a
// floor: over every window (the I/O timeout) it must deliver at least bytes_per_second *
// window, or its pieces go to the next replica. Like curl's low-speed limit.
//
// The window starts when the connection starts asking for data, so time spent idle before
// (a control connection waiting while the verbs path runs) never counts against the peer.
#ifndef FT_TRANSFER_ENGINE_RATE_FLOOR_H_
#define FT_TRANSFER_ENGINE_RATE_FLOOR_H_

#include <chrono>
#include <cstdint>

#include <fmt/format.h>

#include "common/status.h"

namespace ft::rdma {

class RateFloor {
 public:
  using Clock = std::chrono::steady_clock;

  // bytes_per_second 0: no floor.
  RateFloor(uint64_t bytes_per_second, std::chrono::milliseconds window, Clock::time_point start)
      : bytes_per_second_(bytes_per_second), window_(window), start_(start) {}

  // Counts `bytes` received at `now`. Timeout once a whole window has passed with fewer
  // bytes than the floor; then a new window starts.
  Status Add(uint64_t bytes, Clock::time_point now) {
    bytes_ += bytes;
    if (bytes_per_second_ == 0 || window_.count() <= 0 || now - start_ < window_) return Status::Ok();
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = static_cast<double>(bytes_) / seconds;
    if (rate < static_cast<double>(bytes_per_second_)) {
      return Status::Timeout(fmt::format("delivered {} bytes in {:.1f} s ({:.0f} B/s), below the floor of {} B/s",
                                         bytes_, seconds, rate, bytes_per_second_));
    }
    start_ = now;
    bytes_ = 0;
    return Status::Ok();
  }

 private:
  const uint64_t bytes_per_second_;
  const std::chrono::milliseconds window_;
  Clock::time_point start_;
  uint64_t bytes_ = 0;
};

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_RATE_FLOOR_H_

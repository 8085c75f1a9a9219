// The server counts a piece as sent when its write completes, on the server's I/O thread; the
// client may hold every byte a moment before that. Tests that check the server's counters after
// a pull wait, bounded, for the counters to settle instead of reading them at once.
#ifndef FT_TRANSFER_ENGINE_TESTS_SETTLED_STATS_H_
#define FT_TRANSFER_ENGINE_TESTS_SETTLED_STATS_H_

#include <chrono>
#include <thread>

#include "transfer_engine/transfer.h"

namespace ft::rdma::testing {

// Returns the server's stats once bytes_sent reached `bytes_sent` (the server counts each read
// before its bytes, so the reads are in too), or after 5 s with whatever they are then, so a
// count that never arrives still fails.
// `Served` is a Server or anything that runs one and answers stats().
template <typename Served>
ServerStats StatsOnceSent(const Served& server, uint64_t bytes_sent) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ServerStats stats = server.stats();
  while (stats.bytes_sent < bytes_sent && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stats = server.stats();
  }
  return stats;
}

}  // namespace ft::rdma::testing

#endif  // FT_TRANSFER_ENGINE_TESTS_SETTLED_STATS_H_

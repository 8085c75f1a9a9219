// libft.so internal: how long the poller sleeps between rounds.
//
// An op's duration is the poller's observation times (the round that first saw its start, the
// round that saw its end), so the pause after a round is the error of every duration that ends
// in it. The poller polls at FT_POLL_INTERVAL while ops are in flight and backs off to 16x only
// after kBackOffAfterNs without progress (a hang, a very long kernel): then the error is at most
// 16 intervals on an op that already took a second, under 2% of it. A back-off after a number of
// rounds instead (100 rounds, about 100 ms) caught collectives that waited behind a compute
// phase of 100 ms or more, common in training, and added up to 15 ms to what they took: a
// timeout or a comparison of comms built on those durations saw noise the op never had.
#ifndef FT_PRELOAD_POLL_PACING_H_
#define FT_PRELOAD_POLL_PACING_H_

#include <algorithm>
#include <cstdint>

namespace ft::preload::internal {

inline constexpr uint64_t kBackOffAfterNs = 1000000000;  // 1 s without progress
inline constexpr uint64_t kBackOffFactor = 16;
inline constexpr uint64_t kIdlePollNs = 5000000;  // nothing in flight: new ops arrive by queue

// The pause after a round. `in_flight`: ops are pending; `since_progress_ns`: since a round last
// saw an op start, complete or arrive; `poll_ns`: FT_POLL_INTERVAL.
constexpr uint64_t PollPauseNs(bool in_flight, uint64_t since_progress_ns, uint64_t poll_ns) {
  if (!in_flight) return std::max(poll_ns, kIdlePollNs);
  return since_progress_ns < kBackOffAfterNs ? poll_ns : poll_ns * kBackOffFactor;
}

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_POLL_PACING_H_

// The poller's pause between rounds (preload/poll_pacing.h): the error of every duration.
#include "preload/poll_pacing.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ft::preload::internal {
namespace {

constexpr uint64_t kMs = 1000000;

TEST(PollPacing, AnOpWaitingBehindALongKernelIsStillPolledAtTheInterval) {
  // A collective behind a 100 ms (or 900 ms) compute kernel: no progress meanwhile, and its end
  // must still be seen within one interval.
  for (uint64_t waited : {0 * kMs, 100 * kMs, 150 * kMs, 999 * kMs}) {
    EXPECT_EQ(PollPauseNs(true, waited, 1 * kMs), 1 * kMs) << waited / kMs << " ms without progress";
  }
}

TEST(PollPacing, BacksOffOnlyAfterASecondWithoutProgress) {
  EXPECT_EQ(PollPauseNs(true, kBackOffAfterNs, 1 * kMs), 16 * kMs);
  EXPECT_EQ(PollPauseNs(true, 20000 * kMs, 2 * kMs), 32 * kMs);
  // The error it adds is small against what the op already took.
  EXPECT_LT(static_cast<double>(PollPauseNs(true, kBackOffAfterNs, 1 * kMs)) / kBackOffAfterNs, 0.02);
}

TEST(PollPacing, NothingInFlightSleepsAtLeastTheIdlePause) {
  EXPECT_EQ(PollPauseNs(false, 0, 1 * kMs), kIdlePollNs);
  EXPECT_EQ(PollPauseNs(false, 0, 20 * kMs), 20 * kMs);
}

}  // namespace
}  // namespace ft::preload::internal

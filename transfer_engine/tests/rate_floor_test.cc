// RateFloor: a connection is given up only when a whole window passed below the floor.
#include "transfer_engine/rate_floor.h"

#include <gtest/gtest.h>

namespace ft::rdma {
namespace {

using std::chrono::milliseconds;
using Clock = RateFloor::Clock;

TEST(RateFloorTest, BelowTheFloorOverAWholeWindowIsATimeoutSayingTheRate) {
  const Clock::time_point t0{};
  RateFloor floor(1000, milliseconds(2000), t0);
  EXPECT_TRUE(floor.Add(100, t0 + milliseconds(500)).ok());
  EXPECT_TRUE(floor.Add(100, t0 + milliseconds(1999)).ok()) << "the window is not over yet";
  Status s = floor.Add(100, t0 + milliseconds(2000));
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("300 bytes in 2.0 s"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("below the floor of 1000 B/s"), std::string_view::npos) << s.ToString();
}

TEST(RateFloorTest, AWindowAtTheFloorStartsTheNextWindow) {
  const Clock::time_point t0{};
  RateFloor floor(1000, milliseconds(1000), t0);
  EXPECT_TRUE(floor.Add(1000, t0 + milliseconds(1000)).ok());
  // The next window counts from there: 999 bytes over it is too few, whatever came before.
  EXPECT_TRUE(floor.Add(500, t0 + milliseconds(1500)).ok());
  EXPECT_EQ(floor.Add(499, t0 + milliseconds(2000)).code(), StatusCode::kTimeout);
}

TEST(RateFloorTest, ALateReturnIsJudgedOverTheTimeItReallyTook) {
  const Clock::time_point t0{};
  RateFloor floor(1000, milliseconds(1000), t0);
  // recv returned after 4 s with 3000 bytes: 750 B/s, below.
  EXPECT_EQ(floor.Add(3000, t0 + milliseconds(4000)).code(), StatusCode::kTimeout);
  RateFloor fast(1000, milliseconds(1000), t0);
  EXPECT_TRUE(fast.Add(5000, t0 + milliseconds(4000)).ok());
}

TEST(RateFloorTest, ZeroRateOrWindowIsNoFloor) {
  const Clock::time_point t0{};
  RateFloor none(0, milliseconds(1000), t0);
  EXPECT_TRUE(none.Add(1, t0 + milliseconds(60000)).ok());
  RateFloor no_window(1000, milliseconds(0), t0);
  EXPECT_TRUE(no_window.Add(1, t0 + milliseconds(60000)).ok());
}

}  // namespace
}  // namespace ft::rdma

#include "ftworker/health/signal_kinds.h"

#include <gtest/gtest.h>

namespace ft::worker::health {
namespace {

TEST(SignalKindsTest, ApplicationXidsAreNeverCritical) {
  for (int xid : {13, 31, 43, 45, 63, 68, 92, 109}) {
    EXPECT_TRUE(IsApplicationXid(xid)) << xid;
    EXPECT_FALSE(IsCritical(kXid, xid)) << xid;
  }
}

TEST(SignalKindsTest, TheGpusOwnXidsAreCritical) {
  for (int xid : {48, 64, 74, 79, 94, 95, 119, 120}) {
    EXPECT_FALSE(IsApplicationXid(xid)) << xid;
    EXPECT_TRUE(IsCritical(kXid, xid)) << xid;
  }
}

TEST(SignalKindsTest, CountersOfFailuresAreCriticalCongestionIsNot) {
  EXPECT_TRUE(IsCritical(kEccUncorrected, 1));
  EXPECT_TRUE(IsCritical(kLinkDowned, 1));
  EXPECT_TRUE(IsCritical(kGpuLost, 0));
  EXPECT_TRUE(IsCritical(kMce, 0));
  EXPECT_FALSE(IsCritical(kPortXmitWait, 1000));
  EXPECT_FALSE(IsCritical(kThrottle, 0x8));
  EXPECT_FALSE(IsCritical(kPcieReplay, 3));
  EXPECT_FALSE(IsCritical(kOomKill, 0));
  EXPECT_FALSE(IsCritical("a-kind-nobody-knows", 1));
}

}  // namespace
}  // namespace ft::worker::health

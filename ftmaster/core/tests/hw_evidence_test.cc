#include "ftmaster/core/hw_evidence.h"

#include <gtest/gtest.h>

namespace ft::master {
namespace {

proto::HwSignal At(const char* node, int64_t unix_ms, const char* kind, int64_t value, bool critical,
                   std::vector<int> ranks = {}) {
  proto::HwSignal h;
  h.node = node;
  h.source = "nvml";
  h.device = "0000:2a:00.0";
  h.kind = kind;
  h.value = value;
  h.critical = critical;
  h.ranks = std::move(ranks);
  h.unix_ms = unix_ms;
  return h;
}

proto::Incident Crash(int rank, const char* node, int64_t first_ms) {
  proto::Incident i;
  i.id = "1-crash";
  i.kind = "crash";
  i.suspects = {{rank, node, "killed"}};
  i.first_event_unix_ms = first_ms;
  return i;
}

TEST(HwLogTest, KeepsEachNodesSignalsInTimeOrderBoundedAndPruned) {
  HwLog log;
  log.Add(At("n1", 3000, "throttle", 4, false));
  log.Add(At("n1", 1000, "xid", 79, true));  // reported late by its worker
  log.Add(At("n0", 2000, "xid", 13, false));
  std::vector<proto::HwSignal> n1 = log.Of("n1", 0, 10000);
  ASSERT_EQ(n1.size(), 2u);
  EXPECT_EQ(n1[0].unix_ms, 1000);
  EXPECT_EQ(log.Of("n1", 1500, 10000).size(), 1u);
  EXPECT_TRUE(log.Of("n2", 0, 10000).empty());
  for (int i = 0; i < 1000; ++i) log.Add(At("n1", 5000 + i, "pcie-replay", 1, false));
  EXPECT_EQ(log.Of("n1", 0, 1'000'000).size(), kHwPerNode);
  EXPECT_EQ(log.Of("n1", 0, 1'000'000).front().unix_ms, 5000 + 1000 - static_cast<int64_t>(kHwPerNode));
  log.Prune(5900);
  EXPECT_TRUE(log.Of("n0", 0, 10000).empty());
  EXPECT_EQ(log.size(), 100u);
}

TEST(HwEvidenceTest, AttachesTheSuspectsNodesSignalsCriticalFirstOrSaysNoneFound) {
  HwLog log;
  log.Add(At("n1", 100'000, "throttle", 4, false, {2}));
  log.Add(At("n1", 101'000, "xid", 79, true, {2}));
  log.Add(At("n1", 10'000, "xid", 48, true, {3}));  // older than the lookback
  log.Add(At("n0", 101'000, "ecc-uncorrected", 1, true, {0}));  // not a suspect's node
  std::vector<proto::Incident> incidents = {Crash(2, "n1", 102'000), Crash(0, "n0", 50'000)};
  incidents[1].suspects[0].node = "n2";  // a node that reported nothing
  AttachHardware(incidents, log, 103'000);
  ASSERT_EQ(incidents[0].hardware.size(), 2u);
  EXPECT_EQ(incidents[0].hardware[0].value, 79);
  EXPECT_EQ(incidents[0].hardware[0].node, "n1");
  EXPECT_TRUE(incidents[0].hardware_checked);
  ASSERT_FALSE(incidents[0].evidence.empty());
  EXPECT_NE(incidents[0].evidence[0].find("critical Xid 79 on GPU 0000:2a:00.0 (rank 2)"), std::string::npos)
      << incidents[0].evidence[0];
  EXPECT_TRUE(incidents[1].hardware.empty());
  EXPECT_TRUE(incidents[1].hardware_checked);
  ASSERT_EQ(incidents[1].evidence.size(), 1u);
  EXPECT_NE(incidents[1].evidence[0].find("none found on n2"), std::string::npos) << incidents[1].evidence[0];
  EXPECT_EQ(CriticalOn(incidents[0], "n1").size(), 1u);
  EXPECT_TRUE(CriticalOn(incidents[0], "n0").empty());
}

TEST(HwEvidenceTest, AnIncidentCarriesABoundedNumberOfSignals) {
  HwLog log;
  for (int i = 0; i < 100; ++i) log.Add(At("n1", 100'000 + i, "pcie-replay", 1, false, {2}));
  log.Add(At("n1", 100'000, "xid", 79, true, {2}));
  std::vector<proto::Incident> incidents = {Crash(2, "n1", 100'050)};
  AttachHardware(incidents, log, 100'200);
  ASSERT_EQ(incidents[0].hardware.size(), kHwPerIncident);
  EXPECT_EQ(incidents[0].hardware[0].kind, "xid") << "the critical signal is never cut";
}

}  // namespace
}  // namespace ft::master

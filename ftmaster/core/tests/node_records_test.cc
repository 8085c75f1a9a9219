#include "ftmaster/core/node_records.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ft::master {
namespace {

using Kind = proto::NodeRecordKind;

proto::Incident Incident(const char* kind, std::vector<proto::Suspect> suspects) {
  proto::Incident i;
  i.id = std::string("1700000000000-") + kind;
  i.kind = kind;
  i.suspects = std::move(suspects);
  i.first_event_unix_ms = 1'700'000'000'000;
  i.decided_unix_ms = 1'700'000'001'000;
  return i;
}

proto::HwSignal Xid(const char* node, bool critical, std::vector<int> ranks = {5}) {
  proto::HwSignal s;
  s.node = node;
  s.source = "nvml";
  s.device = "0000:2a:00.0";
  s.kind = "xid";
  s.value = critical ? 79 : 13;
  s.critical = critical;
  s.ranks = std::move(ranks);
  return s;
}

std::vector<std::pair<std::string, Kind>> Pairs(const IncidentRecords& r) {
  std::vector<std::pair<std::string, Kind>> out;
  for (const proto::NodeRecord& x : r.records) out.emplace_back(x.node, x.kind);
  return out;
}

TEST(NodeRecordsTest, AHangThatEvictedGivesItsNodeASuspectAndAnEvictionWithTheReason) {
  proto::Incident i = Incident("hang", {{5, "node1", "never reached allreduce #812"}, {7, "node1", "also"}});
  i.evicted = {{"node1", "a hang suspect"}};
  const IncidentRecords r = NodeRecordsOf(i, "llama", 64);
  ASSERT_EQ(Pairs(r), (std::vector<std::pair<std::string, Kind>>{{"node1", Kind::kSuspect}, {"node1", Kind::kEvicted}}));
  EXPECT_EQ(r.nodes_named, 1u);
  EXPECT_EQ(r.nodes_left_out, 0u);
  const proto::NodeRecord& suspect = r.records[0];
  EXPECT_EQ(suspect.job, "llama");
  EXPECT_EQ(suspect.incident, i.id);
  EXPECT_EQ(suspect.incident_kind, "hang");
  EXPECT_EQ(suspect.rank, 5);  // its first suspect rank
  EXPECT_EQ(suspect.nodes, 1);
  EXPECT_EQ(suspect.unix_ms, i.decided_unix_ms);
  EXPECT_EQ(suspect.detail, "never reached allreduce #812");
  EXPECT_EQ(r.records[1].detail, "a hang suspect");
}

TEST(NodeRecordsTest, EachIncidentKindMapsToItsRecordKind) {
  EXPECT_EQ(NodeRecordsOf(Incident("crash", {{6, "n1", "killed"}}), "j", 64).records.at(0).kind, Kind::kCrash);
  EXPECT_EQ(NodeRecordsOf(Incident("straggler", {{6, "n1", "slow"}}), "j", 64).records.at(0).kind, Kind::kSlow);
  EXPECT_EQ(NodeRecordsOf(Incident("slow-link", {{6, "n1", ""}, {7, "n2", ""}}), "j", 64).records.at(1).kind, Kind::kSlow);
  EXPECT_EQ(NodeRecordsOf(Incident("transport-hang", {{6, "n1", ""}}), "j", 64).records.at(0).kind, Kind::kSuspect);
  EXPECT_EQ(NodeRecordsOf(Incident("host-frozen", {{6, "n1", ""}}), "j", 64).records.at(0).kind, Kind::kSuspect);
  // Not the node's fault: nothing.
  EXPECT_TRUE(NodeRecordsOf(Incident("busy", {{6, "n1", "busy on the host"}}), "j", 64).records.empty());
  EXPECT_EQ(NodeRecordsOf(Incident("busy", {{6, "n1", ""}}), "j", 64).nodes_named, 0u);
  EXPECT_TRUE(NodeRecordsOf(Incident("restore-mismatch", {{6, "n1", ""}}), "j", 64).records.empty());
}

TEST(NodeRecordsTest, ACrashWithHardwareEvidenceRecordsTheCriticalSignalsOnly) {
  proto::Incident i = Incident("crash", {{5, "node1", "killed"}});
  i.hardware = {Xid("node1", true), Xid("node1", false), Xid("node0", false)};
  i.evicted = {{"node1", "a crash with hardware evidence: critical Xid 79"}};
  const IncidentRecords r = NodeRecordsOf(i, "j", 64);
  EXPECT_EQ(Pairs(r), (std::vector<std::pair<std::string, Kind>>{
                          {"node1", Kind::kCrash}, {"node1", Kind::kEvicted}, {"node1", Kind::kHardware}}));
  EXPECT_NE(r.records[2].detail.find("Xid 79"), std::string::npos) << r.records[2].detail;
}

TEST(NodeRecordsTest, AHardwareIncidentGivesHardwareRecordsNotSuspects) {
  proto::Incident i = Incident("hardware", {{0, "node0", "ecc"}, {1, "node0", "ecc"}});
  proto::HwSignal ecc = Xid("node0", true, {0, 1});
  ecc.kind = "ecc-uncorrected";
  i.hardware = {ecc};
  const IncidentRecords r = NodeRecordsOf(i, "j", 64);
  EXPECT_EQ(Pairs(r), (std::vector<std::pair<std::string, Kind>>{{"node0", Kind::kHardware}}));
  EXPECT_EQ(r.records[0].rank, 0);
}

TEST(NodeRecordsTest, OneSuspectAmongManyKnowsHowManyWereNamed) {
  proto::Incident i = Incident("transport-hang", {{0, "a", ""}, {1, "a", ""}, {8, "b", ""}, {16, "c", ""}});
  const IncidentRecords r = NodeRecordsOf(i, "j", 64);
  ASSERT_EQ(r.records.size(), 3u);
  for (const proto::NodeRecord& x : r.records) EXPECT_EQ(x.nodes, 3) << x.node;
}

TEST(NodeRecordsTest, AnIncidentNamingThousandsOfNodesIsBoundedEvictedAndHardwareFirst) {
  // A job-wide transport hang of a 131,072-rank job: 16,384 nodes of 8 ranks.
  std::vector<proto::Suspect> suspects;
  for (int rank = 0; rank < 131072; ++rank) suspects.push_back({rank, "n" + std::to_string(rank / 8), ""});
  proto::Incident i = Incident("transport-hang", std::move(suspects));
  i.evicted = {{"n9000", "its NIC's link went down"}};
  i.hardware = {Xid("n12000", true)};
  const IncidentRecords r = NodeRecordsOf(i, "j", 64);
  EXPECT_EQ(r.nodes_named, 16384u);
  EXPECT_EQ(r.nodes_left_out, 16384u - 64u);
  std::set<std::string> nodes;
  for (const proto::NodeRecord& x : r.records) {
    nodes.insert(x.node);
    EXPECT_EQ(x.nodes, 16384);
  }
  EXPECT_EQ(nodes.size(), 64u);
  ASSERT_GE(r.records.size(), 3u);
  EXPECT_EQ(r.records[0].node, "n9000");  // the evicted node first
  EXPECT_TRUE(nodes.count("n12000"));     // then the one with a critical signal
  EXPECT_TRUE(nodes.count("n0"));         // then the suspects in order
  EXPECT_FALSE(nodes.count("n100"));
}

TEST(NodeRecordsTest, LongReasonsAreCutOnACharacterBoundary) {
  proto::Incident i = Incident("hang", {{5, "node1", std::string(300, 'x')}});
  i.evicted = {{"node1", std::string(236, 'r') + "\xC3\xA9\xC3\xA9\xC3\xA9"}};  // an é across the cut
  const IncidentRecords r = NodeRecordsOf(i, "j", 64);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_LE(r.records[0].detail.size(), proto::kNodeRecordDetailBytes);
  EXPECT_EQ(r.records[0].detail.substr(r.records[0].detail.size() - 3), "...");
  const std::string& cut = r.records[1].detail;
  EXPECT_LE(cut.size(), proto::kNodeRecordDetailBytes);
  EXPECT_EQ(cut, std::string(236, 'r') + "...");  // the é that did not fit is not split
}

}  // namespace
}  // namespace ft::master

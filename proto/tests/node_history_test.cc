// The records of a node's history across jobs and the cluster-wide cordons
// (proto/node_history.h): their keys, what the codec refuses, and hostile bytes.
#include "proto/node_history_codec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "proto/codec.h"
#include "proto/keys.h"
#include "proto/tests/sample_values.h"

namespace ft::proto {
namespace {

using Json = nlohmann::json;
using namespace ft::proto::testing;

TEST(NodeHistoryKeysTest, OutsideEveryJobTaggedByNode) {
  EXPECT_EQ(Keys::NodeHistory("node1"), "ft:node:{node1}:history");
  EXPECT_EQ(Keys::NodeHistory("gpu 7/a"), "ft:node:{gpu_7_a}:history");  // sanitized as in every key
  EXPECT_EQ(Keys::NodesIndex(), "ft:nodes");
  EXPECT_EQ(Keys::Cordons(), "ft:cordon");
  // No job's prefix: a job's ACL patterns (ft:{J}:*) never cover them by accident.
  EXPECT_EQ(Keys::NodeHistory("n").rfind(Keys("n").prefix(), 0), std::string::npos);
}

TEST(NodeHistoryCodecTest, IncidentRecordsNeedTheirJobAndIncidentCordonsDoNot) {
  NodeRecord r = SampleNodeRecord();
  r.job.clear();
  NodeRecord out;
  EXPECT_EQ(Decode(Encode(r), &out).message(), "job: missing (required in records of kind 'evicted')");
  r = SampleNodeRecord();
  r.incident.clear();
  EXPECT_EQ(Decode(Encode(r), &out).message(), "incident: missing (required in records of kind 'evicted')");
  EXPECT_TRUE(out == NodeRecord{});
  NodeRecord cordon;
  cordon.kind = NodeRecordKind::kCordon;
  cordon.node = "node1";
  cordon.unix_ms = 1;
  cordon.detail = "flaky NVLink";
  ASSERT_TRUE(Decode(Encode(cordon), &out).ok());
  EXPECT_TRUE(out == cordon);
}

TEST(NodeHistoryCodecTest, UnknownKindsAndBadNumbersAreNamed) {
  Json j = Json::parse(Encode(SampleNodeRecord()));
  j["kind"] = "exploded";
  NodeRecord out;
  EXPECT_EQ(Decode(j.dump(), &out).message(),
            "kind: unknown node record kind 'exploded' (suspect, crash, slow, evicted, hardware, cordon, uncordon)");
  j = Json::parse(Encode(SampleNodeRecord()));
  j["nodes"] = 0;
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
  j = Json::parse(Encode(SampleNodeRecord()));
  j["unix_ms"] = -5;
  EXPECT_EQ(Decode(j.dump(), &out).message().rfind("unix_ms: must not be negative", 0), 0u);
  Json c = Json::parse(Encode(SampleCordon()));
  c["reason"] = "";
  CordonEntry cordon;
  EXPECT_EQ(Decode(c.dump(), &cordon).message(), "reason: must not be empty");
}

TEST(NodeHistoryCodecTest, CordonsLapseAtTheirEnd) {
  CordonEntry c = SampleCordon();
  EXPECT_TRUE(c.Active(c.until_unix_ms - 1));
  EXPECT_FALSE(c.Active(c.until_unix_ms));
  c.until_unix_ms = 0;
  EXPECT_TRUE(c.Active(INT64_MAX));
}

TEST(NodeHistoryCodecTest, AnIncidentCarriesItsEvictionsAndOlderOnesReadWithout) {
  Incident in = SampleIncident();
  Incident out;
  ASSERT_TRUE(Decode(Encode(in), &out).ok());
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].node, "node1");
  Json j = Json::parse(Encode(in));
  j.erase("evicted");  // written by a master from before
  ASSERT_TRUE(Decode(j.dump(), &out).ok());
  EXPECT_TRUE(out.evicted.empty());
  j["evicted"] = Json::array({{{"why", "no node"}}});
  EXPECT_EQ(Decode(j.dump(), &out).message(), "evicted[0].node: missing (required)");
}

// Random bytes and mutated records: an error of a code a caller handles and the output left
// alone, or a value that survives its own round trip; never a crash or an exception.
template <typename T>
void Hostile(const std::string& sample, uint32_t seed) {
  std::mt19937 rng(seed);
  size_t accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text;
    if (i % 2 == 0) {
      text.resize(rng() % 96);
      for (char& c : text) c = static_cast<char>(rng() % 256);
      if (i % 4 == 0) text = "{\"v\":1," + text;
    } else {
      text = sample;
      for (int m = 1 + static_cast<int>(rng() % 4); m > 0 && !text.empty(); --m) {
        const size_t at = rng() % text.size();
        switch (rng() % 3) {
          case 0: text[at] = static_cast<char>(rng() % 256); break;
          case 1: text.erase(at, 1 + rng() % 8); break;
          default: text.insert(at, 1, "{}[]\":,0-9a\\"[rng() % 12]); break;
        }
      }
    }
    T out{};
    const Status s = Decode(text, &out);
    if (!s.ok()) {
      EXPECT_TRUE(s.code() == StatusCode::kCorrupt || s.code() == StatusCode::kUnsupported) << s.ToString();
      EXPECT_TRUE(out == T{}) << "output set on failure: " << text;
      continue;
    }
    ++accepted;
    T again{};
    ASSERT_TRUE(Decode(Encode(out), &again).ok()) << text;
    EXPECT_TRUE(again == out) << text;
  }
  EXPECT_GT(accepted, 0u) << "no mutation kept a value valid: the test tries nothing that decodes";
}

TEST(NodeHistoryCodecTest, HostileBytesAreRefusedOrRoundTrip) {
  Hostile<NodeRecord>(Encode(SampleNodeRecord()), 31);
  Hostile<CordonEntry>(Encode(SampleCordon()), 32);
}

}  // namespace
}  // namespace ft::proto

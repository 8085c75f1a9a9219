// The node sets, the heartbeats, the leader lease, the cordons, the prefetch reports and the
// transfer secret meet their readers through the in-memory Redis: what the makers write reads
// back as the readers decode it; expiry, NX and a value under another node's field behave as
// the callers rely on.
#include "schema/node_sets.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/node_history_codec.h"
#include "proto/prefetch_codec.h"
#include "proto/notice.h"
#include "redis/fake/fake_store.h"
#include "schema/node_hashes.h"
#include "schema/published.h"

namespace ft::schema {
namespace {

using Nodes = std::set<std::string>;

TEST(NodeSetsTest, WorkersAndEvictedReadBackAsNodeNames) {
  redis::FakeRedis server;
  const proto::Keys keys("j");
  EXPECT_EQ(DecodeNodes(server.Execute(GetWorkers(keys))), Nodes{});  // never written
  ASSERT_FALSE(server.Execute(AddWorker(keys, "node1")).is_error());
  ASSERT_FALSE(server.Execute(AddWorker(keys, "node0")).is_error());
  ASSERT_FALSE(server.Execute(AddWorker(keys, "node1")).is_error());
  EXPECT_EQ(DecodeNodes(server.Execute(GetWorkers(keys))), (Nodes{"node0", "node1"}));

  ASSERT_FALSE(server.Execute(AddEvicted(keys, {"node7", "node3"})).is_error());
  ASSERT_FALSE(server.Execute({"SADD", keys.Evicted(), ""}).is_error());  // foreign: no node's name
  EXPECT_EQ(DecodeNodes(server.Execute(GetEvicted(keys))), (Nodes{"node3", "node7"}));
  EXPECT_EQ(server.Execute(CountEvicted(keys)).integer(), 3) << "the foreign member counts in SCARD";
  ASSERT_FALSE(server.Execute(RemoveEvicted(keys, "node7")).is_error());
  EXPECT_EQ(DecodeNodes(server.Execute(GetEvicted(keys))), (Nodes{"node3"}));
  EXPECT_EQ(DecodeNodes(redis::Reply::Integer(3)), Nodes{}) << "a reply that is no set names no node";
  EXPECT_EQ(DecodeNodes(redis::Reply::Error("WRONGTYPE")), Nodes{});
}

TEST(NodeSetsTest, AHeartbeatReadsBackAndLapsesAfterItsTtl) {
  redis::FakeRedis server;
  server.SetUnixMs(1700000000000);
  const proto::Keys keys("j");
  proto::WorkerHeartbeat beat;
  beat.node = "node2";
  beat.host = "host-2";
  beat.pid = 4242;
  beat.ranks = {4, 5};
  beat.unix_ms = 1700000000000;
  ASSERT_FALSE(server.Execute(SetHeartbeat(keys, beat, std::chrono::seconds(5))).is_error());

  const redis::Reply value = server.Execute(GetHeartbeat(keys, "node2"));
  ASSERT_TRUE(value.is_string());
  proto::WorkerHeartbeat read;
  ASSERT_TRUE(proto::Decode(value.str(), &read).ok());
  EXPECT_EQ(read, beat);
  EXPECT_EQ(server.Execute(HeartbeatExists(keys, "node2")).integer(), 1);
  EXPECT_EQ(server.Execute(HeartbeatExists(keys, "node3")).integer(), 0);

  server.AdvanceMs(4900);
  EXPECT_EQ(server.Execute(HeartbeatExists(keys, "node2")).integer(), 1);
  server.AdvanceMs(200);
  EXPECT_EQ(server.Execute(HeartbeatExists(keys, "node2")).integer(), 0) << "no beat for longer than its TTL";
}

TEST(NodeSetsTest, TheLeaseIsTakenOnlyWhereNobodyHoldsItAndLapses) {
  redis::FakeRedis server;
  server.SetUnixMs(1700000000000);
  const proto::Keys keys("j");
  EXPECT_TRUE(server.Execute(GetLeader(keys)).is_nil());
  EXPECT_TRUE(server.Execute(ClaimLease(keys.Leader(), "master-a", std::chrono::milliseconds(3000))).Is("OK"));
  EXPECT_TRUE(server.Execute(ClaimLease(keys.Leader(), "master-b", std::chrono::milliseconds(3000))).is_nil());
  EXPECT_EQ(server.Execute(GetLeader(keys)).str(), "master-a");
  EXPECT_EQ(server.Execute(GetLeaseHolder(keys.Leader())).str(), "master-a");

  server.AdvanceMs(3001);
  EXPECT_TRUE(server.Execute(ClaimLease(keys.Leader(), "master-b", std::chrono::milliseconds(3000))).Is("OK"));
  EXPECT_EQ(server.Execute(GetLeader(keys)).str(), "master-b");
}

proto::CordonEntry Cordon(const char* node, const char* reason) {
  proto::CordonEntry c;
  c.node = node;
  c.reason = reason;
  c.unix_ms = 1700000000000;
  c.by = "ops@host";
  return c;
}

TEST(NodeHashesTest, CordonsReadBackAndOneUnderAnotherNodesFieldIsRefused) {
  redis::FakeRedis server;
  ASSERT_FALSE(server.Execute(SetCordon(Cordon("node0", "xid 79"))).is_error());
  ASSERT_FALSE(server.Execute(SetCordon(Cordon("node1", "ecc"))).is_error());
  ASSERT_FALSE(server.Execute({"HSET", proto::Keys::Cordons(), "node2", proto::Encode(Cordon("node9", "x"))}).is_error());
  ASSERT_FALSE(server.Execute({"HSET", proto::Keys::Cordons(), "node3", "{\"v\":1"}).is_error());

  std::vector<HashValue<proto::CordonEntry>> all;
  ASSERT_TRUE(DecodeCordons(server.Execute(GetCordons()), &all).ok());
  std::map<std::string, HashValue<proto::CordonEntry>> by_field;
  for (auto& c : all) by_field.emplace(c.field, c);
  ASSERT_EQ(by_field.size(), 4u);
  ASSERT_TRUE(by_field["node0"].ok());
  EXPECT_EQ(by_field["node0"].value, Cordon("node0", "xid 79"));
  EXPECT_TRUE(by_field["node1"].ok());
  EXPECT_FALSE(by_field["node2"].ok());
  EXPECT_NE(by_field["node2"].why.message().find("node9"), std::string::npos) << by_field["node2"].why.message();
  EXPECT_FALSE(by_field["node3"].ok());
  EXPECT_EQ(by_field["node3"].raw, "{\"v\":1");

  EXPECT_EQ(server.Execute(RemoveCordons({"node0", "node3", "node-never"})).integer(), 2);
  all.clear();
  ASSERT_TRUE(DecodeCordons(server.Execute(GetCordons()), &all).ok());
  EXPECT_EQ(all.size(), 2u);
  EXPECT_FALSE(DecodeCordons(redis::Reply::Integer(1), &all).ok()) << "a reply that is no hash";
}

TEST(NodeHashesTest, PrefetchReportsReadBackAndAnotherNodesReportIsRefused) {
  redis::FakeRedis server;
  const proto::Keys keys("j");
  proto::PrefetchReport report;
  report.node = "spare0";
  report.step = 40;
  report.state = proto::PrefetchState::kDone;
  report.started_unix_ms = 1700000000000;
  report.done_unix_ms = 1700000002000;
  report.pull_s = 2;
  ASSERT_FALSE(server.Execute(SetPrefetch(keys, report)).is_error());
  proto::PrefetchReport other = report;
  other.node = "spare9";
  ASSERT_FALSE(server.Execute({"HSET", keys.Prefetch(), "spare1", proto::Encode(other)}).is_error());

  std::vector<HashValue<proto::PrefetchReport>> all;
  ASSERT_TRUE(DecodePrefetch(server.Execute(GetPrefetch(keys)), &all).ok());
  ASSERT_EQ(all.size(), 2u);
  for (const auto& r : all) {
    if (r.field == "spare0") {
      ASSERT_TRUE(r.ok()) << r.why.message();
      EXPECT_EQ(r.value, report);
    } else {
      EXPECT_FALSE(r.ok()) << "spare9's report under spare1";
    }
  }
}

TEST(PublishedTest, TheTransferSecretIsWrittenOnceAndItsNoticeEachTime) {
  redis::FakeRedis server;
  const proto::Keys keys("j");
  EXPECT_EQ(server.Execute(TransferSecretLength(keys)).integer(), 0);
  for (const redis::Argv& argv : PublishTransferSecret(keys, "a1b2")) ASSERT_FALSE(server.Execute(argv).is_error());
  // A second master that raced the first: its secret is dropped.
  for (const redis::Argv& argv : PublishTransferSecret(keys, "ffff0000")) ASSERT_FALSE(server.Execute(argv).is_error());
  EXPECT_EQ(server.Execute(GetTransferSecret(keys)).str(), "a1b2");
  EXPECT_EQ(server.Execute(TransferSecretLength(keys)).integer(), 4);
  EXPECT_EQ(server.Execute({"XLEN", keys.Notify()}).integer(), 2);
}

}  // namespace
}  // namespace ft::schema

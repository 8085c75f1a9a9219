// ClusterClient and RedisStore on a real Redis Cluster (3 masters + 3 replicas on loopback,
// redis/tests/redis_cluster.h): routing by slot, pipelines split over nodes and reassembled in
// order, the cross-slot refusal, MOVED after a slot migrated, ASK while it migrates, the Store
// contract (its Lua scripts in one slot), and a shard's master dying mid-use.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <thread>

#include "redis/client.h"
#include "redis/cluster.h"
#include "redis/redis_store.h"
#include "redis/tests/redis_cluster.h"
#include "redis/tests/store_contract.h"

namespace ft::redis {
namespace {

using namespace ft::redis::testing;
using namespace std::chrono_literals;

// One cluster for the cases that leave it whole.
class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new RedisCluster();
    start_ = cluster_->Start();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_.ok()) << start_.ToString(); }

  // A plain connection to the node at "host:port".
  static Client Direct(const std::string& addr) {
    int i = cluster_->IndexOf(addr);
    EXPECT_GE(i, 0) << addr;
    Client c;
    Status s = c.Connect(cluster_->server(static_cast<size_t>(i)).endpoint(), 2000ms);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return c;
  }
  static std::string NodeId(const std::string& addr) {
    Client c = Direct(addr);
    Reply r;
    EXPECT_TRUE(c.Run({"CLUSTER", "MYID"}, &r).ok());
    return r.str();
  }
  static std::unique_ptr<ClusterClient> Connect() {
    auto c = std::make_unique<ClusterClient>(cluster_->endpoint(), ReconnectPolicy{});
    Status s = c->Connect(5000ms);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return c;
  }

  static RedisCluster* cluster_;
  static Status start_;
};
RedisCluster* ClusterTest::cluster_ = nullptr;
Status ClusterTest::start_;

TEST_F(ClusterTest, RoutesEveryKeyToTheMasterOfItsSlot) {
  auto c = Connect();
  std::set<std::string> owners;
  for (int i = 0; i < 40; ++i) {
    std::string key = "ft:{route" + std::to_string(i) + "}:k";
    Reply r;
    ASSERT_TRUE(c->Run({"SET", key, "v" + std::to_string(i)}, &r).ok());
    std::string owner;
    ASSERT_TRUE(cluster_->OwnerOf(KeySlot(key), &owner).ok());
    EXPECT_EQ(c->OwnerOf(KeySlot(key)), owner);
    owners.insert(owner);
    // The key is where the cluster says it is: the owner answers without a redirect.
    Client direct = Direct(owner);
    ASSERT_TRUE(direct.Run({"GET", key}, &r).ok()) << key;
    EXPECT_EQ(r.str(), "v" + std::to_string(i));
  }
  EXPECT_EQ(owners.size(), 3u) << "40 tags should cover all three masters";
  EXPECT_EQ(c->redirects(), 0u);
}

TEST_F(ClusterTest, PipelineSplitsOverNodesAndKeepsOrder) {
  auto c = Connect();
  std::vector<Argv> commands;
  for (int i = 0; i < 30; ++i) {
    std::string tag = "{pipe" + std::to_string(i % 7) + "}";
    commands.push_back({"INCR", tag + "counter"});
    commands.push_back({"SET", tag + "last", std::to_string(i)});
    commands.push_back({"GET", tag + "last"});
  }
  std::vector<Reply> replies;
  ASSERT_TRUE(c->PipelinePartial(commands, &replies).ok());
  ASSERT_EQ(replies.size(), commands.size());
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(replies[3 * i].integer(), i / 7 + 1) << "INCR #" << i;
    EXPECT_TRUE(replies[3 * i + 1].Is("OK"));
    EXPECT_EQ(replies[3 * i + 2].str(), std::to_string(i)) << "GET right after its SET";
  }
}

TEST_F(ClusterTest, CrossSlotCommandsAreRefusedHere) {
  auto c = Connect();
  Reply r;
  Status s = c->Run({"DEL", "ft:{a}:x", "ft:{b}:y"}, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  std::vector<Reply> replies;
  ASSERT_TRUE(c->PipelinePartial({{"SET", "ft:{a}:x", "1"}, {"DEL", "ft:{a}:x", "ft:{b}:y"},
                                  {"GET", "ft:{a}:x"}},
                                 &replies)
                  .ok());
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_TRUE(replies[1].is_error());
  EXPECT_EQ(replies[1].str().rfind("CROSSSLOT", 0), 0u) << replies[1].str();
  EXPECT_EQ(replies[2].str(), "1") << "the refused command changed nothing";
}

// Moves `slot` from its master to another one, with `key` in it; `finish`: the slot's new
// owner is announced to every master (MOVED afterwards), else it stays migrating (ASK).
void MigrateSlot(RedisCluster& cluster, int slot, const std::string& key, bool finish,
                 std::string* from_addr, std::string* to_addr) {
  std::string from;
  ASSERT_TRUE(cluster.OwnerOf(slot, &from).ok());
  int from_i = cluster.IndexOf(from);
  int to_i = (from_i + 1) % 3;  // another master
  std::string to = cluster.server(static_cast<size_t>(to_i)).host() + ":" +
                   std::to_string(cluster.server(static_cast<size_t>(to_i)).port());
  Client a, b;
  ASSERT_TRUE(a.Connect(cluster.server(static_cast<size_t>(from_i)).endpoint(), 2000ms).ok());
  ASSERT_TRUE(b.Connect(cluster.server(static_cast<size_t>(to_i)).endpoint(), 2000ms).ok());
  Reply id_a, id_b, r;
  ASSERT_TRUE(a.Run({"CLUSTER", "MYID"}, &id_a).ok());
  ASSERT_TRUE(b.Run({"CLUSTER", "MYID"}, &id_b).ok());
  const std::string s = std::to_string(slot);
  ASSERT_TRUE(b.Run({"CLUSTER", "SETSLOT", s, "IMPORTING", id_a.str()}, &r).ok());
  ASSERT_TRUE(a.Run({"CLUSTER", "SETSLOT", s, "MIGRATING", id_b.str()}, &r).ok());
  Status m = a.Run({"MIGRATE", cluster.server(static_cast<size_t>(to_i)).host(),
                    std::to_string(cluster.server(static_cast<size_t>(to_i)).port()), "", "0",
                    "5000", "AUTH", cluster.password(), "KEYS", key},
                   &r);
  ASSERT_TRUE(m.ok()) << m.ToString();
  if (finish) {
    ASSERT_TRUE(b.Run({"CLUSTER", "SETSLOT", s, "NODE", id_b.str()}, &r).ok());
    ASSERT_TRUE(a.Run({"CLUSTER", "SETSLOT", s, "NODE", id_b.str()}, &r).ok());
    for (int i = 0; i < 3; ++i) {
      if (i == from_i || i == to_i) continue;
      Client other;
      ASSERT_TRUE(other.Connect(cluster.server(static_cast<size_t>(i)).endpoint(), 2000ms).ok());
      ASSERT_TRUE(other.Run({"CLUSTER", "SETSLOT", s, "NODE", id_b.str()}, &r).ok());
    }
  }
  *from_addr = from;
  *to_addr = to;
}

TEST_F(ClusterTest, FollowsMovedAfterASlotMigrated) {
  auto c = Connect();
  const std::string key = "ft:{moved}:k";
  const int slot = KeySlot(key);
  Reply r;
  ASSERT_TRUE(c->Run({"SET", key, "before"}, &r).ok());
  std::string from, to;
  MigrateSlot(*cluster_, slot, key, /*finish=*/true, &from, &to);
  ASSERT_EQ(c->OwnerOf(slot), from) << "the client's map is the old one";
  ASSERT_TRUE(c->Run({"GET", key}, &r).ok());
  EXPECT_EQ(r.str(), "before");
  EXPECT_GE(c->redirects(), 1u);
  EXPECT_EQ(c->OwnerOf(slot), to) << "MOVED updates the map";
  ASSERT_TRUE(c->Run({"SET", key, "after"}, &r).ok());
  Client direct = Direct(to);
  ASSERT_TRUE(direct.Run({"GET", key}, &r).ok());
  EXPECT_EQ(r.str(), "after");
}

TEST_F(ClusterTest, FollowsAskWhileASlotMigrates) {
  auto c = Connect();
  const std::string moved_key = "ft:{ask}:moved", staying_key = "ft:{ask}:staying";
  const int slot = KeySlot(moved_key);
  Reply r;
  ASSERT_TRUE(c->Run({"SET", moved_key, "m"}, &r).ok());
  ASSERT_TRUE(c->Run({"SET", staying_key, "s"}, &r).ok());
  std::string from, to;
  MigrateSlot(*cluster_, slot, moved_key, /*finish=*/false, &from, &to);
  // The migrated key answers ASK from the old owner; the other is still there.
  uint64_t before = c->redirects();
  ASSERT_TRUE(c->Run({"GET", moved_key}, &r).ok());
  EXPECT_EQ(r.str(), "m");
  EXPECT_EQ(c->redirects(), before + 1);
  EXPECT_EQ(c->OwnerOf(slot), from) << "ASK leaves the map alone";
  std::vector<Reply> replies;
  ASSERT_TRUE(c->PipelinePartial({{"GET", staying_key}, {"GET", moved_key}, {"GET", staying_key}},
                                 &replies)
                  .ok());
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0].str(), "s");
  EXPECT_EQ(replies[1].str(), "m") << "a redirected reply inside a pipeline is followed in place";
  EXPECT_EQ(replies[2].str(), "s");
}

// The Store contract on the cluster: every key of a case shares the tag of its prefix, so the
// scripts (fence, gate, stream) run in one slot as on a single server.
TEST_F(ClusterTest, StoreContract) {
  Endpoint ep = cluster_->endpoint();
  RedisStore a(ep, ReconnectPolicy{}), b(ep, ReconnectPolicy{});
  ASSERT_TRUE(a.Ensure(Store::Clock::now()));
  ASSERT_TRUE(b.Ensure(Store::Clock::now()));
  ContractFencedRun(a, b, "ft:{contract1}:");
  ContractLease(a, b, "ft:{contract2}:");
  ContractGatedAppend(a, b, "ft:{contract3}:");
  ContractStreams(a, b, "ft:{contract4}:");
  ContractSortedSetsAndHlen(a, b, "ft:{contract5}:");
  EXPECT_EQ(a.Where().rfind("redis+cluster://", 0), 0u) << a.Where();
}

TEST(ClusterFailoverTest, AShardsMasterDiesAndItsReplicaTakesOver) {
  RedisCluster cluster;
  Status s = cluster.Start();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ClusterClient c(cluster.endpoint(), ReconnectPolicy{.connect_timeout = 300ms, .io_timeout = 1000ms});
  ASSERT_TRUE(c.Connect(5000ms).ok());
  const std::string job = "ft:{failover}:";
  const int slot = KeySlot(job + "events");
  Reply r;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(c.Run({"XADD", job + "events", "*", "n", std::to_string(i)}, &r).ok());
  }
  // The replica has every entry before its master dies (WAIT on the shard's master: one
  // replica acknowledged them).
  std::string old_owner = c.OwnerOf(slot);
  {
    int i = cluster.IndexOf(old_owner);
    ASSERT_GE(i, 0);
    Client direct;
    ASSERT_TRUE(direct.Connect(cluster.server(static_cast<size_t>(i)).endpoint(), 2000ms).ok());
    ASSERT_TRUE(direct.Run({"WAIT", "1", "5000"}, &r).ok());
    ASSERT_EQ(r.integer(), 1);
  }
  int killed = -1;
  ASSERT_TRUE(cluster.KillMasterOf(slot, &killed).ok());
  // While the shard has no master, commands for it fail fast and the others keep working.
  auto t0 = std::chrono::steady_clock::now();
  Status during = c.Run({"XADD", job + "events", "*", "n", "lost?"}, &r);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "bounded while the shard is down";
  int other_slot = -1;
  std::string other_key;
  for (int i = 0; other_slot < 0; ++i) {
    other_key = "ft:{other" + std::to_string(i) + "}:k";
    if (c.OwnerOf(KeySlot(other_key)) != old_owner) other_slot = KeySlot(other_key);
  }
  EXPECT_TRUE(c.Run({"SET", other_key, "x"}, &r).ok());
  ASSERT_TRUE(cluster.WaitForNewOwner(slot, old_owner, 30s).ok());
  // The daemon's loop: Ensure, then the write, until it goes through.
  Status after;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  do {
    c.Ensure(ClusterClient::Clock::now());
    after = c.Run({"XADD", job + "events", "*", "n", "20"}, &r);
    if (!after.ok()) std::this_thread::sleep_for(50ms);
  } while (!after.ok() && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(after.ok()) << after.ToString();
  EXPECT_NE(c.OwnerOf(slot), old_owner);
  EXPECT_GE(c.map_refreshes(), 2u);
  ASSERT_TRUE(c.Run({"XRANGE", job + "events", "-", "+"}, &r).ok());
  std::vector<std::string> seen;
  for (const Reply& e : r.elements()) seen.push_back(e[1][1].str());
  // Nothing acknowledged before the failover is lost; the write during it either failed or
  // landed; the one after it is there.
  ASSERT_GE(seen.size(), 21u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], std::to_string(i));
  EXPECT_EQ(seen.back(), "20");
  EXPECT_EQ(seen.size(), during.ok() ? 22u : 21u);
}

}  // namespace
}  // namespace ft::redis

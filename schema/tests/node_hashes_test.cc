// The endpoints and verdicts hashes' makers and readers meet through the in-memory Redis: what
// SetEndpoint / SetVerdict write reads back whole and field by field; a garbled value, or a
// verdict under another step's field, comes back with why and the other fields are still read.
#include "schema/node_hashes.h"
#include "schema/verdict_hash.h"

#include <gtest/gtest.h>

#include "redis/fake/fake_store.h"

namespace ft::schema {
namespace {

proto::TransferEndpoint Endpoint(const char* node, int port) {
  proto::TransferEndpoint e;
  e.node = node;
  e.address = "10.0.0.1";
  e.port = port;
  e.transports = {"tcp"};
  e.unix_ms = 1700000000000;
  return e;
}

TEST(NodeHashesTest, EndpointsReadBackAndAGarbledOneIsReturnedWithWhy) {
  redis::FakeRedis server;
  const proto::Keys keys("j");
  ASSERT_FALSE(server.Execute(SetEndpoint(keys, "node0", Endpoint("node0", 7000))).is_error());
  ASSERT_FALSE(server.Execute(SetEndpoint(keys, "node1", Endpoint("node1", 7001))).is_error());
  ASSERT_FALSE(server.Execute({"HSET", keys.Endpoints(), "node2", "{\"v\":1,"}).is_error());

  std::vector<HashValue<proto::TransferEndpoint>> all;
  ASSERT_TRUE(DecodeEndpoints(server.Execute(GetEndpoints(keys)), &all).ok());
  ASSERT_EQ(all.size(), 3u);
  int good = 0;
  for (const auto& e : all) {
    if (e.field == "node2") {
      EXPECT_FALSE(e.ok());
      EXPECT_EQ(e.raw, "{\"v\":1,");
      continue;
    }
    ASSERT_TRUE(e.ok()) << e.why.message();
    EXPECT_EQ(e.value, Endpoint(e.field.c_str(), e.field == "node0" ? 7000 : 7001));
    ++good;
  }
  EXPECT_EQ(good, 2);

  const redis::Reply one = server.Execute(GetEndpoint(keys, "node1"));
  ASSERT_TRUE(one.is_string());
  proto::TransferEndpoint e;
  ASSERT_TRUE(DecodeEndpoint(one.str(), &e).ok());
  EXPECT_EQ(e, Endpoint("node1", 7001));

  ASSERT_FALSE(server.Execute(RemoveEndpoint(keys, "node1")).is_error());
  EXPECT_TRUE(server.Execute(GetEndpoint(keys, "node1")).is_nil());
  EXPECT_FALSE(DecodeEndpoints(redis::Reply::Integer(1), &all).ok()) << "a reply that is no hash";
}

TEST(VerdictHashTest, VerdictsReadBackAndOneUnderAnotherStepIsRefused) {
  redis::FakeRedis server;
  const proto::Keys keys("j");
  proto::StepVerdict v;
  v.step = 40;
  v.state = proto::VerdictState::kVerified;
  v.shards = 2;
  v.verified_shards = 2;
  v.copies = 4;
  v.why = "every shard's replicas agree";
  ASSERT_FALSE(server.Execute(SetVerdict(keys, v)).is_error());
  proto::StepVerdict misplaced = v;
  misplaced.step = 30;
  ASSERT_FALSE(server.Execute({"HSET", keys.CkptVerdicts(), "50", proto::Encode(misplaced)}).is_error());

  std::vector<HashValue<proto::StepVerdict>> all;
  ASSERT_TRUE(DecodeVerdicts(server.Execute(GetVerdicts(keys)), &all).ok());
  ASSERT_EQ(all.size(), 2u);
  for (const auto& e : all) {
    if (e.field == "40") {
      ASSERT_TRUE(e.ok()) << e.why.message();
      EXPECT_EQ(e.value, v);
    } else {
      EXPECT_FALSE(e.ok()) << "step 30's verdict under field 50";
    }
  }

  const std::vector<int64_t> steps = {50, 45, 40};
  std::vector<HashValue<proto::StepVerdict>> some;
  ASSERT_TRUE(DecodeVerdictsOf(steps, server.Execute(GetVerdictsOf(keys, steps)), &some).ok());
  ASSERT_EQ(some.size(), 2u) << "step 45 is not judged";
  EXPECT_FALSE(some[0].ok());
  EXPECT_EQ(some[1].value, v);

  ASSERT_FALSE(server.Execute(RemoveVerdict(keys, 40)).is_error());
  EXPECT_TRUE(server.Execute({"HGET", keys.CkptVerdicts(), "40"}).is_nil());
}

}  // namespace
}  // namespace ft::schema

// The endpoints hash's maker and readers meet through the in-memory Redis: what SetEndpoint
// writes reads back whole and one node at a time; a garbled node's value comes back with why and
// the other nodes' are still read.
#include "schema/node_hashes.h"

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

}  // namespace
}  // namespace ft::schema

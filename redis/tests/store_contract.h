// One set of cases for any redis::Store: run against FakeStore (store_fake_test.cc, no server)
// and against RedisStore over a real redis-server (store_redis_e2e_test.cc). That both pass
// is what makes the fake a faithful stand-in for the Lua scripts of the real store.
//
// Each case gets two connections to one server (`a`, `b`) and a fresh key prefix.
#ifndef FT_REDIS_TESTS_STORE_CONTRACT_H_
#define FT_REDIS_TESTS_STORE_CONTRACT_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/store.h"

namespace ft::redis::testing {

inline std::string Str(Store& s, const Argv& argv) {
  Reply r;
  Status st = s.Run(argv, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r.is_string() ? r.str() : (r.is_nil() ? "(nil)" : r.DebugString());
}

inline void ContractFencedRun(Store& a, Store& b, const std::string& p) {
  const Fence fence{p + "leader", "a"};
  bool held = true;
  // No lease: nothing runs.
  ASSERT_TRUE(a.FencedRun(fence, {{"SET", p + "x", "1"}}, &held).ok());
  EXPECT_FALSE(held);
  EXPECT_EQ(Str(b, {"GET", p + "x"}), "(nil)");
  // Another holder: nothing runs either.
  Reply r;
  ASSERT_TRUE(b.Run({"SET", p + "leader", "b", "NX", "PX", "60000"}, &r).ok());
  ASSERT_TRUE(a.FencedRun(fence, {{"SET", p + "x", "1"}}, &held).ok());
  EXPECT_FALSE(held);
  EXPECT_EQ(Str(b, {"GET", p + "x"}), "(nil)");
  // Ours: every command runs.
  ASSERT_TRUE(b.Run({"SET", p + "leader", "a", "PX", "60000"}, &r).ok());
  ASSERT_TRUE(a.FencedRun(fence, {{"SET", p + "x", "1"}, {"HSET", p + "h", "f", "v", "g", "w"},
                                  {"SADD", p + "s", "n1", "n2"}},
                          &held)
                  .ok());
  EXPECT_TRUE(held);
  EXPECT_EQ(Str(b, {"GET", p + "x"}), "1");
  EXPECT_EQ(Str(b, {"HGET", p + "h", "g"}), "w");
  ASSERT_TRUE(b.Run({"SMEMBERS", p + "s"}, &r).ok());
  EXPECT_EQ(r.size(), 2u);
  // A command the server refuses fails the operation.
  EXPECT_FALSE(a.FencedRun(fence, {{"HSET", p + "x", "f", "v"}}, &held).ok()) << "WRONGTYPE";
}

inline void ContractLease(Store& a, Store& b, const std::string& p) {
  const std::string key = p + "leader";
  Reply r;
  ASSERT_TRUE(a.Run({"SET", key, "a", "NX", "PX", "60000"}, &r).ok());
  EXPECT_TRUE(r.Is("OK"));
  ASSERT_TRUE(b.Run({"SET", key, "b", "NX", "PX", "60000"}, &r).ok());
  EXPECT_TRUE(r.is_nil()) << "NX: taken";
  bool held = false;
  ASSERT_TRUE(b.RenewIfHeld(key, "b", 60000, &held).ok());
  EXPECT_FALSE(held);
  ASSERT_TRUE(a.RenewIfHeld(key, "a", 60000, &held).ok());
  EXPECT_TRUE(held);
  ASSERT_TRUE(b.DeleteIfHeld(key, "b", &held).ok());
  EXPECT_FALSE(held);
  EXPECT_EQ(Str(b, {"GET", key}), "a");
  ASSERT_TRUE(a.DeleteIfHeld(key, "a", &held).ok());
  EXPECT_TRUE(held);
  EXPECT_EQ(Str(b, {"GET", key}), "(nil)");
  ASSERT_TRUE(a.RenewIfHeld(key, "a", 60000, &held).ok());
  EXPECT_FALSE(held) << "renewing a key that is gone does not create it";
}

inline GatedAppend Incidents(const std::string& p, std::vector<std::string> ids) {
  GatedAppend g;
  g.gate_hash = p + "master";
  g.gate_value = "1700000000000";
  g.stream = p + "incidents";
  g.stream_cap = "10000";
  for (const std::string& id : ids) g.entries.push_back({"decided:" + id, {"kind", "hang", "json", id}});
  g.on_any_win = {{"SADD", p + "evicted", "n1"}, {"HSET", p + "master", "action", "A"}};
  g.always = {{"HSET", p + "master", "cursor", "C"}, {"HDEL", p + "master", "open_incident"}};
  return g;
}

inline void ContractGatedAppend(Store& a, Store& b, const std::string& p) {
  Reply r;
  ASSERT_TRUE(a.Run({"SET", p + "leader", "a", "PX", "60000"}, &r).ok());
  ASSERT_TRUE(a.Run({"HSET", p + "master", "open_incident", "{}"}, &r).ok());
  const Fence fa{p + "leader", "a"}, fb{p + "leader", "b"};
  std::vector<bool> won;
  bool held = false;
  // Fenced out: nothing, not even the `always` part.
  ASSERT_TRUE(b.FencedGatedAppend(fb, Incidents(p, {"1-hang"}), &won, &held).ok());
  EXPECT_FALSE(held);
  EXPECT_TRUE(won.empty());
  EXPECT_EQ(Str(b, {"HGET", p + "master", "cursor"}), "(nil)");
  // The first write wins every gate and appends each incident once, in order.
  ASSERT_TRUE(a.FencedGatedAppend(fa, Incidents(p, {"1-hang", "1-crash"}), &won, &held).ok());
  EXPECT_TRUE(held);
  EXPECT_EQ(won, (std::vector<bool>{true, true}));
  EXPECT_EQ(Str(b, {"HGET", p + "master", "action"}), "A");
  EXPECT_EQ(Str(b, {"HGET", p + "master", "decided:1-hang"}), "1700000000000");
  EXPECT_EQ(Str(b, {"HGET", p + "master", "open_incident"}), "(nil)");
  ASSERT_TRUE(b.Run({"XRANGE", p + "incidents", "-", "+"}, &r).ok());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0][1][3].str(), "1-hang");
  EXPECT_EQ(r[1][1][3].str(), "1-crash");
  // Again (a second master deciding the same window): no gate won, no append, no on-win
  // writes; `always` still runs.
  ASSERT_TRUE(b.Run({"HSET", p + "master", "action", "B", "cursor", "old"}, &r).ok());
  ASSERT_TRUE(a.FencedGatedAppend(fa, Incidents(p, {"1-hang", "1-crash"}), &won, &held).ok());
  EXPECT_EQ(won, (std::vector<bool>{false, false}));
  EXPECT_EQ(Str(b, {"HGET", p + "master", "action"}), "B");
  EXPECT_EQ(Str(b, {"HGET", p + "master", "cursor"}), "C");
  ASSERT_TRUE(b.Run({"XRANGE", p + "incidents", "-", "+"}, &r).ok());
  EXPECT_EQ(r.size(), 2u);
  // An append the server refuses takes its gate back and fails: retried later, never lost.
  GatedAppend bad = Incidents(p, {"2-hang"});
  bad.stream = p + "leader";  // a string: XADD fails with WRONGTYPE
  EXPECT_FALSE(a.FencedGatedAppend(fa, bad, &won, &held).ok());
  EXPECT_EQ(Str(b, {"HGET", p + "master", "decided:2-hang"}), "(nil)");
}

inline void ContractStreams(Store& a, Store& b, const std::string& p) {
  (void)b;
  Reply r;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a.Run({"XADD", p + "ev", "MAXLEN", "~", "1000", "*", "n", std::to_string(i)}, &r).ok());
    ids.push_back(r.str());
  }
  ASSERT_TRUE(a.Run({"XRANGE", p + "ev", "(" + ids[1], "+", "COUNT", "2"}, &r).ok());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0][0].str(), ids[2]);
  EXPECT_EQ(r[1][1][1].str(), "3");
  ASSERT_TRUE(a.Run({"XREVRANGE", p + "ev", "+", "-", "COUNT", "1"}, &r).ok());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0][0].str(), ids[4]);
  ASSERT_TRUE(a.Run({"XRANGE", p + "ev", ids[0], ids[1]}, &r).ok());
  EXPECT_EQ(r.size(), 2u) << "bounds are inclusive";
  ASSERT_TRUE(a.Run({"XRANGE", p + "none", "-", "+"}, &r).ok());
  EXPECT_TRUE(r.is_array() && r.size() == 0);
  ASSERT_TRUE(a.Run({"XREVRANGE", p + "none", "+", "-", "COUNT", "1"}, &r).ok());
  EXPECT_EQ(r.size(), 0u);
  // Hashes and wrong types.
  ASSERT_TRUE(a.Run({"HSET", p + "h", "1", "x", "2", "y"}, &r).ok());
  EXPECT_EQ(r.integer(), 2);
  ASSERT_TRUE(a.Run({"HDEL", p + "h", "1"}, &r).ok());
  ASSERT_TRUE(a.Run({"HGETALL", p + "h"}, &r).ok());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].str(), "2");
  ASSERT_TRUE(a.Run({"HGETALL", p + "nohash"}, &r).ok());
  EXPECT_EQ(r.size(), 0u);
  Status s = a.Run({"GET", p + "h"}, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("WRONGTYPE"), std::string_view::npos) << s.ToString();
  // Pipelines: one reply per command, errors kept in their reply.
  std::vector<Reply> replies;
  ASSERT_TRUE(a.PipelinePartial({{"SET", p + "k", "v", "EX", "5"}, {"GET", p + "h"}, {"GET", p + "k"}},
                                &replies)
                  .ok());
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_TRUE(replies[1].is_error());
  EXPECT_EQ(replies[2].str(), "v");
}

// The checkpoint keys' commands: a sorted set of steps read newest first, and HLEN.
inline void ContractSortedSetsAndHlen(Store& a, Store& b, const std::string& p) {
  Reply r;
  ASSERT_TRUE(a.Run({"ZADD", p + "z", "100", "100", "20", "20"}, &r).ok());
  EXPECT_EQ(r.integer(), 2);
  ASSERT_TRUE(a.Run({"ZADD", p + "z", "300", "300", "100", "100"}, &r).ok());
  EXPECT_EQ(r.integer(), 1) << "an existing member is not added again";
  ASSERT_TRUE(b.Run({"ZREVRANGE", p + "z", "0", "1"}, &r).ok());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].str(), "300");
  EXPECT_EQ(r[1].str(), "100");
  ASSERT_TRUE(b.Run({"ZRANGE", p + "z", "0", "-1"}, &r).ok());
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].str(), "20");
  ASSERT_TRUE(b.Run({"ZREVRANGE", p + "none", "0", "15"}, &r).ok());
  EXPECT_EQ(r.size(), 0u);
  ASSERT_TRUE(b.Run({"ZSCORE", p + "z", "300"}, &r).ok());
  EXPECT_EQ(r.str(), "300");
  ASSERT_TRUE(b.Run({"ZSCORE", p + "z", "7"}, &r).ok());
  EXPECT_TRUE(r.is_nil());
  ASSERT_TRUE(a.Run({"ZREM", p + "z", "20", "7"}, &r).ok());
  EXPECT_EQ(r.integer(), 1);
  ASSERT_TRUE(a.Run({"HSET", p + "h", "0", "x", "1", "y"}, &r).ok());
  ASSERT_TRUE(b.Run({"HLEN", p + "h"}, &r).ok());
  EXPECT_EQ(r.integer(), 2);
  ASSERT_TRUE(b.Run({"HLEN", p + "absent"}, &r).ok());
  EXPECT_EQ(r.integer(), 0);
  EXPECT_FALSE(b.Run({"HLEN", p + "z"}, &r).ok()) << "WRONGTYPE";
  EXPECT_FALSE(b.Run({"ZADD", p + "h", "1", "m"}, &r).ok()) << "WRONGTYPE";
  // The node index's bound (ft:nodes): all but the newest N by rank.
  ASSERT_TRUE(a.Run({"ZADD", p + "n", "5", "e", "1", "a", "3", "c", "2", "b", "4", "d"}, &r).ok());
  ASSERT_TRUE(a.Run({"ZREMRANGEBYRANK", p + "n", "0", "-4"}, &r).ok());
  EXPECT_EQ(r.integer(), 2);
  ASSERT_TRUE(b.Run({"ZRANGE", p + "n", "0", "-1"}, &r).ok());
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].str(), "c");
  ASSERT_TRUE(a.Run({"ZREMRANGEBYRANK", p + "n", "0", "-10"}, &r).ok());
  EXPECT_EQ(r.integer(), 0) << "fewer members than the bound: nothing removed";
  ASSERT_TRUE(a.Run({"ZREMRANGEBYRANK", p + "absent", "0", "-2"}, &r).ok());
  EXPECT_EQ(r.integer(), 0);
  // A set's member taken back (a lifted cordon leaves the job's eviction list).
  ASSERT_TRUE(a.Run({"SADD", p + "s", "x", "y"}, &r).ok());
  ASSERT_TRUE(a.Run({"SREM", p + "s", "x", "absent"}, &r).ok());
  EXPECT_EQ(r.integer(), 1);
  ASSERT_TRUE(b.Run({"SMEMBERS", p + "s"}, &r).ok());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].str(), "y");
  EXPECT_FALSE(b.Run({"SREM", p + "z", "m"}, &r).ok()) << "WRONGTYPE";
}

}  // namespace ft::redis::testing

#endif  // FT_REDIS_TESTS_STORE_CONTRACT_H_

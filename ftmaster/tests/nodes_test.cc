// Nodes across jobs on an in-memory Redis (redis/fake_store.h): the leader's history writer
// (node_history.h) — what it writes, bounded per incident, idempotent across a takeover, never
// in the loop's way when Redis fails or refuses —, the cordons in a job's eviction list
// (cordon_round.h), and `ftmaster nodes` (cli/nodes.h): the listing worst first, garbled
// history entries skipped and counted, cordon, uncordon, the schedulers' lines and
// FT_CORDON_COMMAND.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ftmaster/cli/nodes.h"
#include "ftmaster/cordon_round.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/master_loop.h"
#include "ftmaster/node_history.h"
#include "proto/codec.h"
#include "proto/keys.h"
#include "proto/node_history_codec.h"
#include "redis/fake/fake_store.h"
#include "schema/streams.h"
#include "tests/util/log_capture.h"

namespace ft::master {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using Kind = proto::NodeRecordKind;

constexpr int64_t kT0 = 1'700'000'000'000;

proto::Incident MakeIncident(const std::string& id, const char* kind, std::vector<proto::Suspect> suspects,
                             int64_t decided = kT0) {
  proto::Incident i;
  i.id = id;
  i.kind = kind;
  i.suspects = std::move(suspects);
  i.first_event_unix_ms = decided - 1000;
  i.decided_unix_ms = decided;
  i.decision = "none";
  return i;
}

class NodesTest : public ::testing::Test {
 protected:
  NodesTest() { server_.SetUnixMs(kT0); }

  // A leader's context on its own connection; the lease is made its own.
  std::unique_ptr<LoopContext> Leader(const std::string& id, Config config = Config::Defaults()) {
    MasterOptions o;
    o.job = job_;
    o.id = id;
    o.config = std::move(config);
    o.out = nullptr;
    auto store = std::make_unique<redis::FakeStore>(&server_, id);
    auto ctx = std::make_unique<LoopContext>(std::move(o), std::move(store));
    EXPECT_TRUE(ctx->store->Ensure(Clock::now()));
    server_.Execute({"SET", ctx->keys.Leader(), id});
    return ctx;
  }
  redis::FakeStore* StoreOf(LoopContext& ctx) { return static_cast<redis::FakeStore*>(ctx.store.get()); }

  void Append(const proto::Incident& i) {
    server_.Execute({"XADD", keys_.Incidents(), "*", "kind", i.kind, "suspects", proto::SuspectsField(i.suspects),
                     "json", proto::Encode(i)});
  }
  MasterHash HashOf() {
    MasterHash h;
    for (auto& [f, v] : server_.HGetAll(keys_.MasterState())) h[f] = v;
    return h;
  }
  // The records of a node's history, oldest first (they must all decode).
  std::vector<proto::NodeRecord> History(const std::string& node) {
    std::vector<proto::NodeRecord> out;
    for (const redis::FakeRedis::StreamEntry& e : server_.Stream(proto::Keys::NodeHistory(node))) {
      StreamEntry entry{e.Id(), {}};
      for (size_t i = 0; i + 1 < e.fields.size(); i += 2) entry.fields.emplace_back(e.fields[i], e.fields[i + 1]);
      proto::NodeRecord r;
      Status s = schema::DecodeNodeRecord(entry, node, &r);
      EXPECT_TRUE(s.ok()) << s.ToString();
      out.push_back(r);
    }
    return out;
  }
  std::vector<std::string> Index() {
    redis::Reply r = server_.Execute({"ZRANGE", proto::Keys::NodesIndex(), "0", "-1"});
    std::vector<std::string> out;
    for (const redis::Reply& e : r.elements()) out.push_back(e.str());
    return out;
  }

  redis::FakeRedis server_;
  std::string job_ = "llama";
  proto::Keys keys_{"llama"};
  Clock::time_point now_ = Clock::time_point(std::chrono::hours(1000));
};

// ---- the writer ------------------------------------------------------------------------------

TEST_F(NodesTest, EachIncidentReachesItsNodesHistoriesAndTheIndexThenExpires) {
  auto ctx = Leader("m0");
  NodeHistoryRound round(ctx.get());
  round.NewTerm(now_);
  round.LoadTerm(HashOf());
  proto::Incident hang = MakeIncident("1-hang", "hang", {{5, "node1", "never reached allreduce #812"}});
  hang.decision = "save-then-stop";
  hang.evicted = {{"node1", "a hang suspect"}};
  Append(hang);
  Append(MakeIncident("2-busy", "busy", {{3, "node0", "busy on the host"}}));  // not a fault: nothing
  proto::Incident crash = MakeIncident("3-crash", "crash", {{6, "node1", "killed"}}, kT0 + 5000);
  proto::HwSignal xid;
  xid.node = "node1";
  xid.source = "nvml";
  xid.kind = "xid";
  xid.value = 79;
  xid.critical = true;
  crash.hardware = {xid};
  Append(crash);
  ASSERT_TRUE(round.Due(now_));
  round.Run(now_, kT0);
  const std::vector<proto::NodeRecord> h = History("node1");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].kind, Kind::kSuspect);
  EXPECT_EQ(h[0].job, "llama");
  EXPECT_EQ(h[0].incident, "1-hang");
  EXPECT_EQ(h[1].kind, Kind::kEvicted);
  EXPECT_EQ(h[1].detail, "a hang suspect");
  EXPECT_EQ(h[2].kind, Kind::kCrash);
  EXPECT_EQ(h[3].kind, Kind::kHardware);
  EXPECT_TRUE(History("node0").empty());
  EXPECT_EQ(Index(), (std::vector<std::string>{"node1"}));
  EXPECT_EQ(round.cursor(), server_.Stream(keys_.Incidents()).back().Id());
  EXPECT_EQ(HashOf()["history_cursor"], round.cursor());
  EXPECT_FALSE(round.Due(now_));
  // Nothing new: nothing written again.
  round.Run(now_ + NodeHistoryRound::kPeriod, kT0);
  EXPECT_EQ(History("node1").size(), 4u);
  // The history and the index expire FT_NODE_HISTORY_TTL after their last write.
  const int64_t ttl_ms = std::chrono::duration_cast<std::chrono::milliseconds>(ctx->options.config.node_history_ttl).count();
  EXPECT_EQ(ttl_ms, int64_t{30} * 86'400'000);
  server_.AdvanceMs(ttl_ms - 1000);
  EXPECT_TRUE(server_.Exists(proto::Keys::NodeHistory("node1")));
  server_.AdvanceMs(2000);
  EXPECT_FALSE(server_.Exists(proto::Keys::NodeHistory("node1")));
  EXPECT_FALSE(server_.Exists(proto::Keys::NodesIndex()));
}

TEST_F(NodesTest, ANewLeaderNeverWritesAnIncidentTwice) {
  auto a = Leader("m0");
  NodeHistoryRound first(a.get());
  first.NewTerm(now_);
  first.LoadTerm(HashOf());
  proto::Incident hang = MakeIncident("1-hang", "hang", {{5, "node1", "stuck"}, {9, "node2", "stuck"}});
  hang.evicted = {{"node1", "a hang suspect"}};
  Append(hang);
  // The records are written, then the leader dies before its cursor is (the fenced write fails).
  StoreOf(*a)->FailCommand("FENCED", Status::Unavailable("connection reset (injected)"));
  first.Run(now_, kT0);
  ASSERT_EQ(History("node1").size(), 2u);
  ASSERT_EQ(History("node2").size(), 1u);
  EXPECT_EQ(HashOf().count("history_cursor"), 0u);

  // The next leader re-reads the incident stream from the last cursor (none): nothing twice.
  auto b = Leader("m1");
  NodeHistoryRound second(b.get());
  second.NewTerm(now_);
  second.LoadTerm(HashOf());
  second.Run(now_, kT0);
  EXPECT_EQ(History("node1").size(), 2u);
  EXPECT_EQ(History("node2").size(), 1u);
  EXPECT_EQ(second.records_already_there(), 3u);
  EXPECT_EQ(HashOf()["history_cursor"], server_.Stream(keys_.Incidents()).back().Id());
  // And what comes after is written once.
  Append(MakeIncident("2-crash", "crash", {{9, "node2", "killed"}}, kT0 + 10));
  second.Run(now_ + NodeHistoryRound::kPeriod, kT0 + 10);
  EXPECT_EQ(History("node2").size(), 2u);

  // A third leader with the cursor in place reads nothing old at all.
  auto c = Leader("m2");
  NodeHistoryRound third(c.get());
  third.NewTerm(now_);
  third.LoadTerm(HashOf());
  const uint64_t before = server_.executed();
  third.Run(now_, kT0 + 20);
  EXPECT_EQ(History("node2").size(), 2u);
  EXPECT_EQ(third.records_already_there(), 0u);
  EXPECT_LE(server_.executed() - before, 2u) << "one XRANGE finding nothing";
}

TEST_F(NodesTest, AnIncidentNamingThousandsOfNodesWritesABoundedNumberAndSaysSo) {
  test_util::LogCapture log;
  Config config = Config::Defaults();
  config.node_history_per_incident = 16;
  config.node_history_nodes = 10;
  auto ctx = Leader("m0", config);
  NodeHistoryRound round(ctx.get());
  round.NewTerm(now_);
  std::vector<proto::Suspect> suspects;
  for (int rank = 0; rank < 131072; ++rank) suspects.push_back({rank, "n" + std::to_string(rank / 8), ""});
  Append(MakeIncident("1-transport", "transport-hang", std::move(suspects)));
  const uint64_t before = server_.executed();
  round.Run(now_, kT0);
  size_t with_history = 0;
  for (int n = 0; n < 16384; ++n) with_history += server_.Exists(proto::Keys::NodeHistory("n" + std::to_string(n)));
  EXPECT_EQ(with_history, 16u);
  // Per node written: its records' XADDs, a check of what it holds, PEXPIRE, ZADD; a few more.
  EXPECT_LE(server_.executed() - before, 5u * 16u + 8u);
  EXPECT_EQ(Index().size(), 10u) << "the index is bounded by FT_NODE_HISTORY_NODES";
  EXPECT_EQ(History("n0").at(0).nodes, 16384) << "each record says how many nodes the incident named";
  EXPECT_EQ(log.Count({"1-transport", "16384 nodes", "16 of them", "16368 left out"}), 1u) << log.All();
}

TEST_F(NodesTest, ManyIncidentsAreWrittenInBoundedRuns) {
  auto ctx = Leader("m0");
  NodeHistoryRound round(ctx.get());
  round.NewTerm(now_);
  for (int i = 0; i < 100; ++i) Append(MakeIncident(fmt::format("{}-crash", i), "crash", {{i, "n" + std::to_string(i), ""}}));
  round.Run(now_, kT0);
  EXPECT_EQ(Index().size(), NodeHistoryRound::kBatch);
  EXPECT_TRUE(round.Due(now_)) << "a full batch: the rest at the next tick";
  for (int run = 0; run < 10 && Index().size() < 100; ++run) round.Run(now_, kT0);
  EXPECT_EQ(Index().size(), 100u);
}

TEST_F(NodesTest, RedisFailuresAndRefusalsNeverStopTheLoopAndLoseNothing) {
  test_util::LogCapture log;
  auto ctx = Leader("m0");
  redis::FakeStore* store = StoreOf(*ctx);
  NodeHistoryRound round(ctx.get());
  round.NewTerm(now_);
  Append(MakeIncident("1-crash", "crash", {{1, "node1", ""}}));
  // The connection breaks at the writes: nothing moves, retried after a backoff.
  store->FailCommand("XADD", Status::Unavailable("connection reset (injected)"));
  round.Run(now_, kT0);
  EXPECT_TRUE(History("node1").empty());
  EXPECT_EQ(HashOf().count("history_cursor"), 0u);
  EXPECT_FALSE(round.Due(now_ + std::chrono::milliseconds(500)));
  store->ClearFaults();
  ASSERT_TRUE(store->Ensure(now_));
  round.Run(now_ + std::chrono::seconds(2), kT0);
  EXPECT_EQ(History("node1").size(), 1u);
  EXPECT_EQ(log.Count({"node history not written"}), 1u) << log.All();
  EXPECT_EQ(log.Count({"node history written again"}), 1u) << log.All();
  // Redis refuses the writes (an older ACL): logged once, skipped, the cursor goes on.
  store->FailCommand("XADD", Status::IoError("NOPERM this user has no permissions to access the key"));
  Append(MakeIncident("2-crash", "crash", {{1, "node1", ""}}));
  Append(MakeIncident("3-crash", "crash", {{1, "node1", ""}}));
  round.Run(now_ + std::chrono::seconds(4), kT0);
  Append(MakeIncident("4-crash", "crash", {{1, "node1", ""}}));
  round.Run(now_ + std::chrono::seconds(6), kT0);
  EXPECT_EQ(HashOf()["history_cursor"], server_.Stream(keys_.Incidents()).back().Id());
  EXPECT_EQ(log.Count({"refused XADD"}), 1u) << log.All();
}

TEST_F(NodesTest, GarbledIncidentsAreSkippedAndCounted) {
  auto ctx = Leader("m0");
  NodeHistoryRound round(ctx.get());
  round.NewTerm(now_);
  server_.Execute({"XADD", keys_.Incidents(), "*", "kind", "hang", "json", "{\"v\":1,\"id\":"});
  server_.Execute({"XADD", keys_.Incidents(), "*", "kind", "hang"});
  Append(MakeIncident("3-crash", "crash", {{1, "node1", ""}}));
  round.Run(now_, kT0);
  EXPECT_EQ(History("node1").size(), 1u);
  EXPECT_EQ(ctx->bad.count(), 2u);
  server_.Execute({"HSET", keys_.MasterState(), "history_cursor", "garbage"});
  NodeHistoryRound next(ctx.get());
  next.NewTerm(now_);
  next.LoadTerm(HashOf());  // reported, read from the start: nothing twice
  EXPECT_EQ(ctx->bad.count(), 3u);
  next.Run(now_, kT0);
  EXPECT_EQ(History("node1").size(), 1u);
}

// ---- cordons in a job's eviction list --------------------------------------------------------

TEST_F(NodesTest, CordonsJoinTheEvictionListAndLeaveItWhenLiftedOrLapsed) {
  auto ctx = Leader("m0");
  CordonRound round(ctx.get());
  round.NewTerm(now_);
  proto::CordonEntry c{"node3", "flaky NVLink", kT0, 0, "ops@ctl"};
  proto::CordonEntry lapsing{"node4", "burn-in", kT0, kT0 + 60'000, "ops@ctl"};
  server_.Execute({"HSET", proto::Keys::Cordons(), "node3", proto::Encode(c), "node4", proto::Encode(lapsing),
                   "node5", "{garbled", "node6", proto::Encode(c)});  // node6's value names node3
  server_.Execute({"SADD", keys_.Evicted(), "node1"});
  server_.Execute({"HSET", keys_.MasterState(), "evicted_why:node1", "a hang suspect"});
  server_.Execute({"HSET", proto::Keys::Cordons(), "node1", proto::Encode(proto::CordonEntry{"node1", "x", kT0, 0, ""})});
  round.Run(now_, kT0);
  EXPECT_EQ(server_.Members(keys_.Evicted()), (std::set<std::string>{"node1", "node3", "node4"}));
  EXPECT_EQ(server_.HGet(keys_.MasterState(), "evicted_why:node3"), "cordoned: flaky NVLink");
  EXPECT_EQ(server_.HGet(keys_.MasterState(), "evicted_why:node1"), "a hang suspect") << "its own reason stays";
  EXPECT_EQ(ctx->bad.count(), 2u);
  // node4's cordon lapses, node3's is lifted, node1's too: node1 stays (evicted by the job).
  server_.Execute({"HDEL", proto::Keys::Cordons(), "node3", "node1"});
  round.Run(now_ + CordonRound::kPeriod, kT0 + 61'000);
  EXPECT_EQ(server_.Members(keys_.Evicted()), (std::set<std::string>{"node1"}));
  EXPECT_FALSE(server_.HGet(keys_.MasterState(), "evicted_why:node3").has_value());
}

TEST_F(NodesTest, TheMasterLoopWritesHistoriesAndCordonsWhileItLeads) {
  MasterOptions o;
  o.job = job_;
  o.id = "m0";
  o.config = Config::Defaults();
  o.out = nullptr;
  MasterLoop loop(o, std::make_unique<redis::FakeStore>(&server_, "m0"));
  ASSERT_TRUE(loop.Init().ok());
  proto::Incident hang = MakeIncident("1-hang", "hang", {{5, "node1", "stuck"}});
  hang.evicted = {{"node1", "a hang suspect"}};
  Append(hang);
  server_.Execute({"HSET", proto::Keys::Cordons(), "node7",
                   proto::Encode(proto::CordonEntry{"node7", "lemon", kT0, 0, ""})});
  Clock::time_point now = now_;
  for (int tick = 0; tick < 200; ++tick, now += std::chrono::milliseconds(20)) {
    server_.AdvanceMs(20);
    loop.Tick(now, server_.unix_ms());
  }
  ASSERT_TRUE(loop.leading(now));
  EXPECT_EQ(History("node1").size(), 2u);
  EXPECT_TRUE(server_.Members(keys_.Evicted()).count("node7"));
}

// ---- ftmaster nodes --------------------------------------------------------------------------

class NodesCliTest : public NodesTest {
 protected:
  NodesCliTest() : store_(&server_, "cli") { EXPECT_TRUE(store_.Ensure(Clock::now())); }

  void Put(const proto::NodeRecord& r) {
    server_.Execute({"XADD", proto::Keys::NodeHistory(r.node), "*", "kind", proto::NodeRecordKindName(r.kind), "json",
                     proto::Encode(r)});
    server_.Execute({"ZADD", proto::Keys::NodesIndex(), std::to_string(r.unix_ms), r.node});
  }
  proto::NodeRecord Rec(Kind kind, const char* node, const char* job, const char* incident, int64_t at, int nodes = 1) {
    proto::NodeRecord r;
    r.kind = kind;
    r.node = node;
    r.job = job;
    r.incident = incident;
    r.incident_kind = kind == Kind::kCrash ? "crash" : "hang";
    r.unix_ms = at;
    r.nodes = nodes;
    r.detail = kind == Kind::kEvicted ? "a hang suspect" : "";
    return r;
  }
  NodesOptions Options() {
    NodesOptions o;
    o.now_unix_ms = kT0 + 60'000;
    o.by = "ops@ctl";
    return o;
  }
  std::string Nodes(NodesOptions o, Status* status = nullptr) {
    std::string out;
    Status s = NodesCommand(store_, o, &out);
    if (status != nullptr) {
      *status = s;
    } else {
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    return out;
  }

  redis::FakeStore store_;
};

TEST_F(NodesCliTest, ListsWorstFirstWithWhyAndOnlyLemonsWhenAsked) {
  Put(Rec(Kind::kSuspect, "node1", "a", "a-1", kT0));
  Put(Rec(Kind::kEvicted, "node1", "a", "a-1", kT0));
  Put(Rec(Kind::kCrash, "node1", "b", "b-1", kT0 + 1000));
  Put(Rec(Kind::kEvicted, "node1", "b", "b-1", kT0 + 1000));
  Put(Rec(Kind::kSuspect, "node2", "b", "b-2", kT0 + 2000, 40));  // one of 40: newer, but weighs little
  Put(Rec(Kind::kEvicted, "node1", "b", "b-1", kT0 + 1000));  // a rewrite after a takeover
  NodesOptions o = Options();
  o.json = true;
  Json j = Json::parse(Nodes(o));
  ASSERT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["node"], "node1");
  EXPECT_TRUE(j["nodes"][0]["lemon"].get<bool>());
  EXPECT_EQ(j["nodes"][0]["counts"]["evicted"], 2);
  EXPECT_EQ(j["nodes"][0]["jobs"], Json({"b", "a"}));
  EXPECT_EQ(j["nodes"][0]["records"].size(), 4u);
  EXPECT_EQ(j["nodes"][0]["last"]["job"], "b");
  EXPECT_EQ(j["duplicates"], 1);
  EXPECT_FALSE(j["nodes"][1]["lemon"].get<bool>());
  o.lemons = true;
  j = Json::parse(Nodes(o));
  ASSERT_EQ(j["nodes"].size(), 1u);
  EXPECT_EQ(j["nodes"][0]["node"], "node1");
  o.json = false;
  o.lemons = false;
  const std::string text = Nodes(o);
  EXPECT_LT(text.find("node1"), text.find("node2")) << text;
  EXPECT_NE(text.find("evicted (hang) in job b: a hang suspect"), std::string::npos) << text;
  EXPECT_NE(text.find("one of 40 nodes"), std::string::npos) << text;
}

TEST_F(NodesCliTest, GarbledHistoryEntriesAreSkippedAndCountedNeverFatal) {
  Put(Rec(Kind::kEvicted, "node1", "a", "a-1", kT0));
  const std::string key = proto::Keys::NodeHistory("node1");
  server_.Execute({"XADD", key, "*", "kind", "evicted", "json", "{\"v\":1,\"kind\":\"evicted\""});   // cut
  server_.Execute({"XADD", key, "*", "kind", "crash", "json", proto::Encode(Rec(Kind::kEvicted, "node1", "a", "a-2", kT0))});
  server_.Execute({"XADD", key, "*", "kind", "evicted", "json", proto::Encode(Rec(Kind::kEvicted, "node9", "a", "a-3", kT0))});
  server_.Execute({"XADD", key, "*", "nothing", "here"});
  server_.Execute({"SET", proto::Keys::NodeHistory("node2"), "not a stream"});
  server_.Execute({"ZADD", proto::Keys::NodesIndex(), "1", "node2"});
  NodesOptions o = Options();
  o.json = true;
  const Json j = Json::parse(Nodes(o));
  EXPECT_EQ(j["garbled"], 5);
  ASSERT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["records"].size(), 1u);  // the one good record kept
}

TEST_F(NodesCliTest, RandomBytesInAHistoryNeverCrashTheListing) {
  std::mt19937 rng(7);
  const std::string key = proto::Keys::NodeHistory("node1");
  Put(Rec(Kind::kEvicted, "node1", "a", "a-1", kT0));
  const std::string good = proto::Encode(Rec(Kind::kCrash, "node1", "a", "a-2", kT0));
  for (int i = 0; i < 300; ++i) {
    std::string json = good;
    for (int m = 0; m < 3; ++m) json[rng() % json.size()] = static_cast<char>(rng() % 256);
    server_.Execute({"XADD", key, "*", "kind", i % 2 ? "crash" : std::string(1, static_cast<char>(rng() % 256)), "json", json});
  }
  NodesOptions o = Options();
  o.json = true;
  const Json j = Json::parse(Nodes(o));
  ASSERT_EQ(j["nodes"].size(), 1u);
  const size_t kept = j["nodes"][0]["records"].size();
  EXPECT_GE(kept, 1u);
  EXPECT_EQ(j["garbled"].get<size_t>() + kept + j["duplicates"].get<size_t>(), 301u);
}

TEST_F(NodesCliTest, CordonRoundTripWithTheSchedulersLines) {
  NodesOptions o = Options();
  o.cordon = "node1";
  o.reason = "lemon: it's \"flaky\"; $(reboot) `id`\nsecond line";
  o.for_ms = 24 * 3600 * 1000;
  Nodes(o);
  const std::optional<std::string> raw = server_.HGet(proto::Keys::Cordons(), "node1");
  ASSERT_TRUE(raw.has_value());
  proto::CordonEntry c;
  ASSERT_TRUE(proto::Decode(*raw, &c).ok());
  EXPECT_EQ(c.reason, "lemon: it's \"flaky\"; $(reboot) `id` second line");
  EXPECT_EQ(c.until_unix_ms, o.now_unix_ms + o.for_ms);
  EXPECT_EQ(c.by, "ops@ctl");
  ASSERT_EQ(History("node1").size(), 1u);
  EXPECT_EQ(History("node1")[0].kind, Kind::kCordon);
  NodesOptions lines = Options();
  lines.cordon_commands = "slurm";
  EXPECT_EQ(Nodes(lines), "scontrol update NodeName=node1 State=DRAIN Reason='lemon: it'\\''s \"flaky\"; $(reboot) `id` "
                          "second line'\n");
  lines.cordon_commands = "k8s";
  EXPECT_EQ(Nodes(lines), "kubectl taint nodes node1 ft.io/lemon=lemon_it_s_flaky_reboot_id_second_line:NoSchedule --overwrite\n");
  // Lapsed: no line.
  lines.now_unix_ms = c.until_unix_ms;
  EXPECT_EQ(Nodes(lines), "");
  NodesOptions off = Options();
  off.uncordon = "node1";
  Nodes(off);
  EXPECT_FALSE(server_.HGet(proto::Keys::Cordons(), "node1").has_value());
  EXPECT_EQ(History("node1").back().kind, Kind::kUncordon);
  Status s;
  Nodes(off, &s);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
}

TEST_F(NodesCliTest, BadFlagsAreRefusedBeforeAnyWrite) {
  NodesOptions o = Options();
  o.cordon = "node1; rm -rf /";
  o.reason = "x";
  Status s;
  Nodes(o, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  o.cordon = "node1";
  o.reason = " \n ";
  Nodes(o, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  o.reason = std::string(kMaxCordonReasonBytes + 1, 'r');
  Nodes(o, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  o = Options();
  o.reason = "no cordon";
  Nodes(o, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  o = Options();
  o.cordon_commands = "pbs";
  Nodes(o, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(server_.Exists(proto::Keys::Cordons()));
}

TEST(TaintValueTest, KeepsToWhatKubernetesTakes) {
  EXPECT_EQ(TaintValue("Xid 79 on GPU 0000:2a:00.0"), "Xid_79_on_GPU_0000_2a_00.0");
  EXPECT_EQ(TaintValue("--bad--"), "bad");
  EXPECT_EQ(TaintValue("$$$"), "cordoned");
  const std::string long_value = TaintValue(std::string(100, 'a'));
  EXPECT_EQ(long_value.size(), 63u);
}

// FT_CORDON_COMMAND: the reason reaches the program as one argument and in its environment,
// never through a shell.
TEST(CordonCommandTest, ArgumentsAndEnvironmentNeverAShell) {
  char dir_template[] = "/tmp/ft-cordon-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string script = dir + "/drain";
  const std::string record = dir + "/args";
  const std::string pwned = dir + "/pwned";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " << record << "\n"
      << "printf '%s|%s|%s|%s\\n' \"$FT_CORDON_ACTION\" \"$FT_CORDON_NODE\" \"$FT_CORDON_REASON\" "
         "\"$FT_CORDON_UNTIL_UNIX_MS\" >> " << record << "\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0700), 0);
  const std::string reason = "bad; touch " + pwned + " $(touch " + pwned + ") `touch " + pwned + "` 'q\" ";
  ASSERT_TRUE(RunCordonCommand(script + " --cluster  a", "cordon", "node1", reason, 42, 10'000).ok());
  std::ifstream in(record);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "--cluster\na\ncordon\nnode1\n" + reason + "\ncordon|node1|" + reason + "|42\n");
  EXPECT_NE(access(pwned.c_str(), F_OK), 0) << "the reason ran as a command";
  // A failing or missing program is an error saying how it ended.
  Status s = RunCordonCommand("/bin/false", "cordon", "node1", "r", 0, 10'000);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("exited with status 1"), std::string_view::npos) << s.ToString();
  EXPECT_FALSE(RunCordonCommand(dir + "/absent", "cordon", "node1", "r", 0, 10'000).ok());
  const std::string slow = dir + "/slow";
  {
    std::ofstream f(slow);
    f << "#!/bin/sh\nexec sleep 5\n";
  }
  ASSERT_EQ(chmod(slow.c_str(), 0700), 0);
  s = RunCordonCommand(slow, "cordon", "node1", "r", 0, 200);
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  std::remove(record.c_str());
  std::remove(script.c_str());
  std::remove(slow.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace ft::master

// The live page (ftmaster/page/): the pure renderers on constructed snapshots — escaping of
// foreign bytes, a garbled value shown as such, the wait-for graph drawn from an incident's
// evidence and suspects, 131,072 ranks kept to a bounded page — and the reader on a FakeRedis.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ftmaster/page/reader.h"
#include "ftmaster/page/render.h"
#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/master_codec.h"
#include "proto/node_history_codec.h"
#include "redis/fake/fake_store.h"

namespace ft::master::page {
namespace {

using Json = nlohmann::json;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

proto::Incident HangIncident() {
  proto::Incident i;
  i.id = "hang-1";
  i.kind = "hang";
  i.decision = "save-then-stop";
  i.suspects = {{3, "node1", "host hang: never entered allreduce #40 of comm 00000000000000ab; 3 ranks wait on it directly, 3 in all"}};
  i.evidence = {"rank 0 (node0) waits on allreduce #40 of comm 00000000000000ab (GPU started 2.1 s ago), blocked by rank 3 (node1)",
                "rank 3 (node1) blocks 1 ops in all", "hardware: none found on node1 from 30 s before the incident"};
  i.message = "1 rank stuck, the job waits on rank 3";
  return i;
}

TEST(PageRenderTest, HtmlEscapeEscapesMarkupAndReplacesBytesThatAreNotUtf8) {
  EXPECT_EQ(HtmlEscape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
  EXPECT_EQ(HtmlEscape("n\xff" "de"), "n\xEF\xBF\xBD" "de");
  EXPECT_EQ(HtmlEscape("a\x01" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(HtmlEscape("caf\xC3\xA9"), "caf\xC3\xA9");  // valid UTF-8 stays
  EXPECT_EQ(HtmlEscape("\xC3"), "\xEF\xBF\xBD");        // cut mid-character
  EXPECT_EQ(HtmlEscape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
}

TEST(PageRenderTest, ForeignBytesInNamesAndMessagesNeverBecomeMarkup) {
  Snapshot s;
  s.job = "job<1>";
  s.job_state = "running";
  s.redis_up = true;
  s.ranks = {{0, "<img src=x onerror=alert(1)>", "running", 5, 100, true}, {1, "node\xff", "dead", 4, 0, true}};
  proto::Incident i = HangIncident();
  i.message = "</div><script>alert(2)</script>";
  i.suspects[0].node = "<b>evil</b>";
  s.incidents = {{"1-0", i}};
  s.incidents_total = 1;
  const std::string html = RenderHtml(s, 2);
  EXPECT_EQ(html.find("<img src=x"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<b>evil</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;/div&gt;&lt;script&gt;alert(2)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("node\xEF\xBF\xBD"), std::string::npos);
  EXPECT_NE(html.find("ft: job&lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("<meta http-equiv=\"refresh\" content=\"2\">"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "the page needs no script";
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg")) << "no external asset";
  // JSON: valid UTF-8 whatever the bytes.
  const std::string ranks = RenderJson(s, Panel::kRanks);
  Json j = Json::parse(ranks);
  EXPECT_EQ(j["list"][0]["node"], "<img src=x onerror=alert(1)>");
  EXPECT_EQ(j["list"][1]["node"], "node\xEF\xBF\xBD");
}

TEST(PageRenderTest, TheWaitForGraphNamesWaiterAndWaitedOnAndMarksTheSuspect) {
  const WaitForGraph g = WaitFor(HangIncident());
  ASSERT_EQ(g.edges.size(), 1u);
  EXPECT_EQ(g.edges[0].waiter, 0);
  EXPECT_EQ(g.edges[0].waited_on, 3);
  EXPECT_EQ(g.edges[0].what, "allreduce #40 of comm 00000000000000ab");
  ASSERT_EQ(g.unnamed_waiters.count(3), 1u);
  EXPECT_EQ(g.unnamed_waiters.at(3), 2) << "3 wait directly, 1 named";
  Snapshot s;
  s.job = "j";
  s.job_state = "stopping";
  s.incidents = {{"1-0", HangIncident()}};
  const std::string html = RenderHtml(s, 0);
  EXPECT_NE(html.find("<g class=\"edge\" data-waiter=\"0\" data-waited-on=\"3\">"), std::string::npos) << html;
  EXPECT_NE(html.find("data-waiter=\"more\" data-count=\"2\" data-waited-on=\"3\""), std::string::npos);
  EXPECT_NE(html.find("<g class=\"rank suspect\" data-rank=\"3\" data-suspect=\"1\">"), std::string::npos);
  EXPECT_NE(html.find("<g class=\"rank waiter\" data-rank=\"0\">"), std::string::npos);
  EXPECT_EQ(html.find("http-equiv"), std::string::npos) << "refresh 0: none";
  Json j = Json::parse(RenderJson(s, Panel::kIncidents));
  EXPECT_EQ(j["incidents"][0]["wait_for"]["edges"][0]["waiter"], 0);
  EXPECT_EQ(j["incidents"][0]["wait_for"]["edges"][0]["waited_on"], 3);
  EXPECT_EQ(j["incidents"][0]["suspects"][0]["rank"], 3);
  // A crash: suspects, no edges.
  proto::Incident crash;
  crash.kind = "crash";
  crash.suspects = {{2, "node1", "process killed by signal 9 while the job ran"}};
  crash.evidence = {"rank 2 exit: killed by signal 9"};
  EXPECT_TRUE(WaitFor(crash).edges.empty());
  s.incidents = {{"2-0", crash}};
  EXPECT_NE(RenderHtml(s, 0).find("no wait-for edges in the evidence"), std::string::npos);
}

TEST(PageRenderTest, ManyWaitersAreDrawnUpToALimitAndCountedBeyond) {
  proto::Incident i = HangIncident();
  i.evidence.clear();
  for (int w = 0; w < 100; ++w) {
    i.evidence.push_back("rank " + std::to_string(w + 10) + " waits on allreduce #1 of comm 1, blocked by rank 3");
  }
  i.suspects[0].why = "100 ranks wait on it directly, 100 in all";
  Snapshot s;
  s.incidents = {{"1-0", i}};
  const std::string html = RenderHtml(s, 0);
  EXPECT_EQ(Count(html, "<g class=\"edge\" "), kGraphWaitersMax);
  EXPECT_NE(html.find("76 more ranks waiting"), std::string::npos);
}

Snapshot Huge(int ranks, int per_node) {
  Snapshot s;
  s.job = "big";
  s.job_state = "running";
  s.ranks.reserve(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    RankRow row{r, "node" + std::to_string(r / per_node), "running", 1000 + r % 7, 812.5, true};
    if (r % 997 == 0) row.state = "dead";
    s.ranks.push_back(std::move(row));
  }
  return s;
}

TEST(PageRenderTest, ThePageOf131072RanksStaysBounded) {
  for (int per_node : {8, 1}) {
    const Snapshot s = Huge(131072, per_node);
    const std::vector<RankGroup> groups = GroupRanks(s.ranks);
    EXPECT_LE(groups.size(), kGroupRowsMax);
    EXPECT_GE(groups.size(), kGroupRowsMax / 2);
    int ranks = 0, nodes = 0;
    for (const RankGroup& g : groups) {
      ranks += g.ranks;
      nodes += g.nodes;
    }
    EXPECT_EQ(ranks, 131072);
    EXPECT_EQ(nodes, 131072 / per_node);
    EXPECT_EQ(groups.front().first_node, "node0");
    EXPECT_EQ(groups.back().last_node, "node" + std::to_string(131072 / per_node - 1)) << "natural order";
    const std::string html = RenderHtml(s, 2);
    EXPECT_LT(html.size(), 2u << 20) << per_node << " per node";
    EXPECT_EQ(Count(html, "<tr class=\"group\">"), groups.size());
    EXPECT_EQ(Count(html, "<tr data-rank="), kNotableMax) << "the ranks not running, up to the limit";
    EXPECT_NE(html.find("132 dead"), std::string::npos) << "the totals count every rank";
    const std::string json = RenderJson(s, Panel::kRanks);
    EXPECT_LT(json.size(), 2u << 20);
    Json j = Json::parse(json);
    EXPECT_EQ(j["ranks"], 131072);
    EXPECT_EQ(j["grouped_by"], "node-group");
    EXPECT_FALSE(j.contains("list"));
  }
  // A small job: by node, and every rank.
  const Snapshot small = Huge(16, 4);
  EXPECT_EQ(GroupRanks(small.ranks).size(), 4u);
  EXPECT_EQ(Count(RenderHtml(small, 0), "<tr data-rank="), 16u);
  EXPECT_TRUE(NaturalLess("node2", "node10"));
  EXPECT_FALSE(NaturalLess("node10", "node2"));
  EXPECT_TRUE(NaturalLess("a", "ab"));
}

class PageReaderTest : public ::testing::Test {
 protected:
  PageReaderTest() : store_(&server_), keys_("job1") { store_.Ensure(std::chrono::steady_clock::now()); }
  void Cmd(const redis::Argv& argv) {
    redis::Reply reply;
    ASSERT_TRUE(store_.Run(argv, &reply).ok()) << argv[0];
  }
  Snapshot Read() {
    Snapshot s;
    ReadSnapshot(store_, "job1", 5000, &bad_, &hashes_, &s);
    return s;
  }
  redis::FakeRedis server_;
  redis::FakeStore store_;
  proto::Keys keys_;
  BadValues bad_;
  RankHashes hashes_;
};

TEST_F(PageReaderTest, ReadsTheJobAndShowsAGarbledValueAsSuch) {
  for (int r = 0; r < 4; ++r) {
    proto::Membership m;
    m.rank = r;
    m.node = "node" + std::to_string(r / 2);
    m.state = "running";
    Cmd({"HSET", keys_.Ranks(), std::to_string(r), proto::Encode(m)});
    proto::RankSummary sum;
    sum.rank = r;
    sum.node = m.node;
    sum.declared_step = 37;
    sum.step_p50_ms = 200;
    Cmd({"HSET", keys_.SummaryOf(r), std::to_string(r), proto::Encode(sum)});
  }
  Cmd({"HSET", keys_.SummaryOf(5), "5", "{not json"});  // a garbled summary (of no member)
  Cmd({"SET", keys_.Leader(), "m0"});
  Cmd({"HSET", keys_.MasterState(), "job_state", "stopped"});
  Cmd({"XADD", keys_.Incidents(), "*", "json", proto::Encode(HangIncident())});
  Cmd({"XADD", keys_.Incidents(), "*", "json", "{\"v\":1,\"kind\":<oops>"});
  proto::StepVerdict v;
  v.step = 38;
  v.state = proto::VerdictState::kVerified;
  v.shards = 4;
  v.verified_shards = 4;
  Cmd({"ZADD", keys_.CkptSteps(), "38", "38"});
  Cmd({"ZADD", keys_.CkptSteps(), "20", "20"});
  Cmd({"HSET", keys_.CkptVerdicts(), "38", proto::Encode(v)});
  proto::RestorePlan plan;
  plan.version = 3;
  plan.step = 38;
  Cmd({"SET", keys_.Restore(), proto::Encode(plan)});
  proto::Goodput g;
  g.rank_s[static_cast<size_t>(proto::GoodputCause::kProductive)] = 90;
  g.rank_s[static_cast<size_t>(proto::GoodputCause::kDetection)] = 10;
  Cmd({"HSET", keys_.MasterState(), "goodput", proto::Encode(g)});

  Snapshot s = Read();
  EXPECT_TRUE(s.redis_up);
  EXPECT_EQ(s.job_state, "stopped");
  EXPECT_EQ(s.leader, "m0");
  ASSERT_EQ(s.ranks.size(), 4u);
  EXPECT_EQ(s.ranks[3].node, "node1");
  EXPECT_EQ(s.ranks[3].step, 37);
  EXPECT_EQ(s.ranks[3].step_ms, 200);
  EXPECT_EQ(s.incidents_total, 2);
  ASSERT_EQ(s.incidents.size(), 1u);
  EXPECT_EQ(s.incidents[0].incident.id, "hang-1");
  ASSERT_EQ(s.checkpoints.size(), 2u);
  EXPECT_EQ(s.checkpoints[0].step, 38);
  ASSERT_TRUE(s.checkpoints[0].verdict.has_value());
  EXPECT_FALSE(s.checkpoints[1].verdict.has_value());
  ASSERT_TRUE(s.plan.has_value());
  ASSERT_TRUE(s.goodput.has_value());
  EXPECT_FALSE(s.node_keys_present);
  ASSERT_EQ(s.garbled.size(), 2u);
  EXPECT_EQ(s.garbled[0].where, "ranks");
  EXPECT_NE(s.garbled[0].why.find("1 rank value did not decode"), std::string::npos) << s.garbled[0].why;
  EXPECT_EQ(s.garbled[1].where.rfind("incident ", 0), 0u);
  // Read again (nothing decoded anew): the garbled value is still said.
  hashes_.next_read_unix_ms = 0;
  ASSERT_EQ(Read().garbled.size(), 2u);
  Cmd({"HDEL", keys_.SummaryOf(5), "5"});
  hashes_.next_read_unix_ms = 0;
  s = Read();
  ASSERT_EQ(s.garbled.size(), 1u);

  PageReader reader({.job = "job1", .endpoint = {}, .interval = {}});
  reader.Publish(s);
  auto routes = reader.Routes();
  for (const char* path : {"/", "/api/job.json", "/api/ranks.json", "/api/incidents.json", "/api/checkpoints.json",
                           "/api/goodput.json", "/api/nodes.json"}) {
    ASSERT_EQ(routes.count(path), 1u) << path;
  }
  const std::string html = routes["/"].render();
  EXPECT_EQ(routes["/"].content_type, "text/html; charset=utf-8");
  EXPECT_NE(html.find("garbled: {&quot;v&quot;:1,&quot;kind&quot;:&lt;oops&gt;"), std::string::npos) << html;
  EXPECT_NE(html.find("data-ettr=\"0.9000\""), std::string::npos);
  EXPECT_NE(html.find("<p data-plan-step=\"38\">"), std::string::npos);
  EXPECT_NE(html.find("no node history in this Redis"), std::string::npos);
  Json job = Json::parse(routes["/api/job.json"].render());
  EXPECT_EQ(job["state"], "stopped");
  EXPECT_EQ(job["garbled"][0]["raw"], "{\"v\":1,\"kind\":<oops>");
  EXPECT_EQ(s.ranks[3].step, 37) << "the second read kept what the first decoded";
  Json gp = Json::parse(routes["/api/goodput.json"].render());
  EXPECT_DOUBLE_EQ(gp["ettr"].get<double>(), 0.9);
  EXPECT_EQ(gp["rank_s"]["detection"], 10);
  Json ck = Json::parse(routes["/api/checkpoints.json"].render());
  EXPECT_EQ(ck["steps"][0]["verdict"], "verified");
  EXPECT_EQ(ck["steps"][1]["verdict"], "unjudged");
  EXPECT_EQ(ck["restore_plan"]["step"], 38);

  // A garbled job state and ledger: shown as garbled, not as a state or an empty ledger.
  Cmd({"HSET", keys_.MasterState(), "job_state", "runn\xffing"});
  Cmd({"HSET", keys_.MasterState(), "goodput", "{\"v\":1,\"rank_s\":\"lots\"}"});
  s = Read();
  EXPECT_EQ(s.job_state, "garbled");
  EXPECT_FALSE(s.goodput.has_value());
  const std::string html2 = RenderHtml(s, 0);
  EXPECT_NE(html2.find("garbled: runn\xEF\xBF\xBDing"), std::string::npos);
  EXPECT_NE(html2.find("<td>master goodput</td><td class=\"garbled\">garbled: "), std::string::npos);
}

// The rank hashes are read again only once (kRankReadShare - 1) x the last read's time has passed;
// in between, the page shows the last read's ranks and says when they were read.
TEST_F(PageReaderTest, TheRankHashesAreReadAtMostATenthOfTheTime) {
  proto::Membership m;
  m.rank = 0;
  m.node = "node0";
  m.state = "running";
  Cmd({"HSET", keys_.Ranks(), "0", proto::Encode(m)});
  Snapshot s;
  ReadSnapshot(store_, "job1", 5000, &bad_, &hashes_, &s);
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks_read_unix_ms, 5000);
  hashes_.next_read_unix_ms = 5000 + 9 * 300;  // as if the read took 300 ms
  m.rank = 1;
  Cmd({"HSET", keys_.Ranks(), "1", proto::Encode(m)});
  s = Snapshot();
  ReadSnapshot(store_, "job1", 7000, &bad_, &hashes_, &s);
  EXPECT_EQ(s.ranks.size(), 1u) << "read again too soon";
  EXPECT_EQ(s.ranks_read_unix_ms, 5000);
  EXPECT_NE(RenderHtml(s, 0).find("(read at 00:00:05.000 UTC)"), std::string::npos);
  s = Snapshot();
  ReadSnapshot(store_, "job1", 7700, &bad_, &hashes_, &s);
  EXPECT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks_read_unix_ms, 7700);
  EXPECT_EQ(RenderHtml(s, 0).find("(read at"), std::string::npos);
}

TEST_F(PageReaderTest, NodeHistoryWhenItsKeysExist) {
  proto::Membership m;
  m.rank = 0;
  m.node = "node0";
  m.state = "running";
  Cmd({"HSET", keys_.Ranks(), "0", proto::Encode(m)});
  proto::NodeRecord r;
  r.kind = proto::NodeRecordKind::kEvicted;
  r.node = "node0";
  r.job = "other<job>";
  r.detail = "hang suspect";
  r.incident = "hang-7";
  r.unix_ms = 1000;
  Cmd({"XADD", proto::Keys::NodeHistory("node0"), "*", "kind", "evicted", "json", proto::Encode(r)});
  Cmd({"ZADD", proto::Keys::NodesIndex(), "1", "node0"});
  Snapshot s = Read();
  EXPECT_TRUE(s.node_keys_present);
  ASSERT_EQ(s.node_history.size(), 1u);
  EXPECT_EQ(s.node_history[0].total, 1);
  const std::string html = RenderHtml(s, 0);
  EXPECT_NE(html.find("evicted (other&lt;job&gt;: hang suspect)"), std::string::npos) << html;
}

// The cordons as every job's master reads them: one whose record names another node than its
// field is listed as garbled, not shown as that field's cordon.
TEST_F(PageReaderTest, ACordonUnderAnotherNodesFieldIsShownAsGarbled) {
  proto::CordonEntry c;
  c.node = "node3";
  c.reason = "xid 79";
  c.unix_ms = 1000;
  Cmd({"HSET", proto::Keys::Cordons(), "node3", proto::Encode(c)});
  c.node = "node9";
  Cmd({"HSET", proto::Keys::Cordons(), "node4", proto::Encode(c)});
  Snapshot s = Read();
  EXPECT_TRUE(s.node_keys_present);
  ASSERT_EQ(s.cordons.size(), 1u);
  EXPECT_EQ(s.cordons[0].node, "node3");
  ASSERT_EQ(s.garbled.size(), 1u);
  EXPECT_EQ(s.garbled[0].where, "cordon node4");
  EXPECT_NE(s.garbled[0].why.find("node9"), std::string::npos) << s.garbled[0].why;
}

TEST_F(PageReaderTest, RedisDownIsSaid) {
  store_.Drop();
  Snapshot s = Read();
  EXPECT_FALSE(s.redis_up);
  EXPECT_NE(RenderHtml(s, 0).find("down: "), std::string::npos);
}

}  // namespace
}  // namespace ft::master::page

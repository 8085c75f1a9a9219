// ftmaster's metrics, read from a FakeRedis as the master writes it: incidents counted once by
// kind and decision with their detect/decide times, verdicts counted as they change, the leader
// lease, the job state, the timeouts' version, the goodput ledger.
#include "ftmaster/master_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/master_codec.h"
#include "redis/fake/fake_store.h"

namespace ft::master {
namespace {

class MasterMetricsTest : public ::testing::Test {
 protected:
  MasterMetricsTest() : store_(&server_), keys_("job1") { store_.Ensure(std::chrono::steady_clock::now()); }

  MasterMetrics Make(const std::string& id) {
    return MasterMetrics({.job = "job1", .node = "h0", .master_id = id, .endpoint = {}, .interval = {}}, &registry_);
  }
  void Cmd(const redis::Argv& argv) {
    redis::Reply reply;
    ASSERT_TRUE(store_.Run(argv, &reply).ok());
  }
  void AddIncident(const std::string& kind, const std::string& decision, double decide_ms) {
    proto::Incident incident;
    incident.id = kind + std::to_string(++n_);
    incident.kind = kind;
    incident.decision = decision;
    incident.first_event_unix_ms = 1000;
    incident.window_closed_unix_ms = 1500;
    incident.decide_ms = decide_ms;
    Cmd({"XADD", keys_.Incidents(), "*", "json", proto::Encode(incident)});
  }
  void SetVerdict(int64_t step, proto::VerdictState state) {
    proto::StepVerdict v;
    v.step = step;
    v.state = state;
    Cmd({"HSET", keys_.CkptVerdicts(), std::to_string(step), proto::Encode(v)});
  }
  double Value(const std::string& name, const metrics::LabelValues& labels) {
    return registry_.Value(name, labels);
  }

  redis::FakeRedis server_;
  redis::FakeStore store_;
  proto::Keys keys_;
  metrics::Registry registry_;
  int n_ = 0;
};

TEST_F(MasterMetricsTest, CountsEachIncidentOnceByKindAndDecision) {
  MasterMetrics m = Make("m0");
  AddIncident("hang", "save-then-stop", 1200);
  AddIncident("hang", "save-then-stop", 800);
  AddIncident("crash", "stop", 300);
  Cmd({"XADD", keys_.Incidents(), "*", "json", "{garbled"});
  ASSERT_TRUE(m.Round(store_, 0.001));
  ASSERT_TRUE(m.Round(store_, 0.001));  // read again: nothing new
  EXPECT_EQ(Value("ft_master_incidents_total", {"job1", "hang", "save-then-stop"}), 2);
  EXPECT_EQ(Value("ft_master_incidents_total", {"job1", "crash", "stop"}), 1);
  EXPECT_EQ(Value("ft_master_incident_decide_seconds", {"job1", "hang"}), 2);  // observations
  AddIncident("crash", "stop", 400);
  ASSERT_TRUE(m.Round(store_, 0.001));
  EXPECT_EQ(Value("ft_master_incidents_total", {"job1", "crash", "stop"}), 2);
  const std::string text = registry_.Render();
  EXPECT_NE(text.find("ft_master_incident_decide_seconds_bucket{job=\"job1\",kind=\"hang\",le=\"1\"} 1\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("ft_master_incident_decide_seconds_sum{job=\"job1\",kind=\"hang\"} 2\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("ft_master_incident_detect_seconds_count{job=\"job1\",kind=\"crash\"} 2\n"),
            std::string::npos) << text;
  EXPECT_EQ(Value("ft_master_redis_rtt_seconds", {"job1", "h0"}), 0.001);
}

TEST_F(MasterMetricsTest, VerdictsCountedAsTheyChangeAndTheNewestVerifiedStep) {
  MasterMetrics m = Make("m0");
  ASSERT_TRUE(m.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_ckpt_verified_step", {"job1"}), -1);
  SetVerdict(10, proto::VerdictState::kIncomplete);
  ASSERT_TRUE(m.Round(store_, -1));
  SetVerdict(10, proto::VerdictState::kVerified);
  SetVerdict(20, proto::VerdictState::kUntrusted);
  ASSERT_TRUE(m.Round(store_, -1));
  ASSERT_TRUE(m.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_ckpt_verdicts_total", {"job1", "incomplete"}), 1);
  EXPECT_EQ(Value("ft_master_ckpt_verdicts_total", {"job1", "verified"}), 1);
  EXPECT_EQ(Value("ft_master_ckpt_verdicts_total", {"job1", "untrusted"}), 1);
  EXPECT_EQ(Value("ft_master_ckpt_steps", {"job1", "verified"}), 1);
  EXPECT_EQ(Value("ft_master_ckpt_steps", {"job1", "incomplete"}), 0);
  EXPECT_EQ(Value("ft_master_ckpt_verified_step", {"job1"}), 10);
}

TEST_F(MasterMetricsTest, LeaderJobStateTimeoutsAndEvicted) {
  MasterMetrics leader = Make("m0");
  MasterMetrics standby = Make("m1");
  Cmd({"SET", keys_.Leader(), "m0"});
  Cmd({"HSET", keys_.MasterState(), "job_state", "running"});
  Cmd({"SET", keys_.TimeoutsVersion(), "7"});
  Cmd({"SADD", keys_.Evicted(), "n1"});
  ASSERT_TRUE(standby.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_leader", {"job1", "h0"}), 0);
  ASSERT_TRUE(leader.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_leader", {"job1", "h0"}), 1);
  EXPECT_EQ(Value("ft_master_job_state", {"job1", "running"}), 1);
  EXPECT_EQ(Value("ft_master_timeouts_version", {"job1"}), 7);
  EXPECT_EQ(Value("ft_master_evicted_nodes", {"job1"}), 1);
  Cmd({"HSET", keys_.MasterState(), "job_state", "stopped"});
  ASSERT_TRUE(leader.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_job_state", {"job1", "running"}), 0);
  EXPECT_EQ(Value("ft_master_job_state", {"job1", "stopped"}), 1);
}

// A job_state this build does not know is no state: no gauge is 1 and the value makes no series
// of its own; a known state afterwards is shown again.
TEST_F(MasterMetricsTest, AnUnknownJobStateSetsNoStateGauge) {
  MasterMetrics m = Make("m0");
  Cmd({"HSET", keys_.MasterState(), "job_state", "stopping"});
  ASSERT_TRUE(m.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_job_state", {"job1", "stopping"}), 1);
  Cmd({"HSET", keys_.MasterState(), "job_state", "paused"});
  ASSERT_TRUE(m.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_job_state", {"job1", "stopping"}), 0);
  EXPECT_TRUE(std::isnan(Value("ft_master_job_state", {"job1", "paused"})));
  for (const char* state : {"running", "stopped", "finished"}) {
    EXPECT_TRUE(std::isnan(Value("ft_master_job_state", {"job1", state}))) << state << ": never shown";
  }
  EXPECT_EQ(registry_.Render().find("paused"), std::string::npos);
  Cmd({"HSET", keys_.MasterState(), "job_state", "finished"});
  ASSERT_TRUE(m.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_job_state", {"job1", "finished"}), 1);
  EXPECT_EQ(Value("ft_master_job_state", {"job1", "stopping"}), 0);
}

TEST_F(MasterMetricsTest, ARedisFailureKeepsTheFiguresAndTheCursor) {
  MasterMetrics m = Make("m0");
  AddIncident("hang", "stop", 100);
  ASSERT_TRUE(m.Round(store_, -1));
  store_.Drop();
  EXPECT_FALSE(m.Round(store_, -1));
  store_.Restore();
  ASSERT_TRUE(store_.Ensure(std::chrono::steady_clock::now()));
  AddIncident("hang", "stop", 100);
  ASSERT_TRUE(m.Round(store_, -1));
  EXPECT_EQ(Value("ft_master_incidents_total", {"job1", "hang", "stop"}), 2);
}

// The goodput ledger the leader keeps: ETTR and every cause's rank-seconds; a garbled ledger
// leaves the figures as they were.
TEST_F(MasterMetricsTest, GoodputRatioAndSecondsByCause) {
  MasterMetrics m = Make("m0");
  proto::Goodput g;
  g.since_unix_ms = 1000;
  g.last_unix_ms = 101000;
  g.rank_s[static_cast<size_t>(proto::GoodputCause::kProductive)] = 720;
  g.rank_s[static_cast<size_t>(proto::GoodputCause::kDetection)] = 50;
  g.rank_s[static_cast<size_t>(proto::GoodputCause::kRelaunch)] = 30;
  Cmd({"HSET", keys_.MasterState(), "goodput", proto::Encode(g)});
  ASSERT_TRUE(m.Round(store_, -1));
  EXPECT_DOUBLE_EQ(Value("ft_master_goodput_ratio", {"job1"}), 0.9);
  EXPECT_EQ(Value("ft_master_goodput_rank_seconds", {"job1", "productive"}), 720);
  EXPECT_EQ(Value("ft_master_goodput_rank_seconds", {"job1", "detection"}), 50);
  EXPECT_EQ(Value("ft_master_goodput_rank_seconds", {"job1", "slowed"}), 0);
  Cmd({"HSET", keys_.MasterState(), "goodput", "{\"v\":1,\"rank_s\":7}"});
  ASSERT_TRUE(m.Round(store_, -1));
  EXPECT_DOUBLE_EQ(Value("ft_master_goodput_ratio", {"job1"}), 0.9);
}

}  // namespace
}  // namespace ft::master

#include "ftmaster/core/window_reads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "ftmaster/core/attribution.h"
#include "ftmaster/core/tests/job_fixture.h"

namespace ft::master {
namespace {

using testing::Job;

proto::Event TimeoutOf(Job& job, int rank, uint64_t comm, int64_t at) {
  proto::Event e;
  e.kind = "timeout";
  e.rank = rank;
  e.unix_ms = at;
  e.comm_id = comm;
  e.seq = 11;
  e.started = true;
  e.progress = job.Progress(rank);
  return e;
}

std::vector<proto::RankProgress> Tables(Job& job, const std::vector<int>& ranks) {
  std::vector<proto::RankProgress> out;
  for (int r : ranks) out.push_back(job.Progress(r));
  return out;
}

// tp=8 dp=4 pp=4; rank X = (tp 3, dp 1, pp 2) never entered tp allreduce #11; its tp peers wait.
TEST(WindowReadsTest, NeedsTheMembersOfTheTimedOutCommunicatorUntilTheirReportsAreFresh) {
  Job job(8, 4, 4);
  const int x = job.Rank(3, 1, 2);
  const uint64_t tp = job.TpComm(1, 2);
  for (int t = 0; t < 8; ++t) {
    if (t != 3) job.Set(job.Rank(t, 1, 2), tp, 11, 11, 10, 5000);
  }
  WindowReads reads;
  reads.Rebuild(job.membership);
  const int64_t first = Job::kNow - 500;
  std::vector<proto::Event> events = {TimeoutOf(job, job.Rank(0, 1, 2), tp, first)};

  // Nothing read yet: the 8 members, all needed but the event's own rank? Its table came with
  // the event but was observed before the event (kNow - 100 > first: fresh).
  WindowReads::Plan plan = reads.Make({}, events);
  std::vector<int> members;
  for (int t = 0; t < 8; ++t) members.push_back(job.Rank(t, 1, 2));
  EXPECT_EQ(plan.members, members);
  std::vector<int> others = members;
  others.erase(std::find(others.begin(), others.end(), job.Rank(0, 1, 2)));
  EXPECT_EQ(plan.needed, others);

  // Read, but X's report predates the first event: still needed.
  job.Progress(x).observed_unix_ms = first - 1;
  std::vector<proto::RankProgress> tables = Tables(job, members);
  plan = reads.Make(tables, events);
  EXPECT_EQ(plan.members, members);
  EXPECT_EQ(plan.needed, std::vector<int>{x});

  job.Progress(x).observed_unix_ms = first + 1;
  tables = Tables(job, members);
  plan = reads.Make(tables, events);
  EXPECT_TRUE(plan.needed.empty());
  EXPECT_EQ(reads.MembershipOf(plan.members).size(), 8u);
}

TEST(WindowReadsTest, FollowsWaitsIntoOtherCommunicatorsAndSkipsGoneRanks) {
  Job job(8, 4, 4);
  const uint64_t tp = job.TpComm(1, 2);
  const uint64_t pp = job.PpComm(3, 1);
  for (int t = 0; t < 8; ++t) {
    if (t != 3) job.Set(job.Rank(t, 1, 2), tp, 11, 11, 10, 5000);
  }
  // The tp group's rank 3 waits in a p2p op toward stage 3: the pipeline joins the window.
  job.Set(job.Rank(3, 1, 2), pp, 21, 21, 20, 4000, proto::OpKind::kSend, 3);
  job.membership[static_cast<size_t>(job.Rank(3, 1, 0))].state = "exited";
  WindowReads reads;
  reads.Rebuild(job.membership);
  std::vector<proto::Event> events = {TimeoutOf(job, job.Rank(0, 1, 2), tp, Job::kNow - 500)};
  std::vector<int> all;
  for (int t = 0; t < 8; ++t) all.push_back(job.Rank(t, 1, 2));
  std::vector<proto::RankProgress> tables = Tables(job, all);
  WindowReads::Plan plan = reads.Make(tables, events);
  for (int s = 0; s < 4; ++s) all.push_back(job.Rank(3, 1, s));
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  EXPECT_EQ(plan.members, all);
  // Stages 0, 1, 3 of the pipeline are not read yet; stage 0's rank exited: not needed.
  EXPECT_EQ(plan.needed, (std::vector<int>{job.Rank(3, 1, 1), job.Rank(3, 1, 3)}));
}

// The 16k job of ScaleTest (one compute-hung rank, everything else waits on it through tp, pp
// and dp): attribution over the window's members alone names the same rank.
TEST(WindowReadsTest, AttributionOverTheWindowsMembersNamesTheSameRoot) {
  const int T = 8, D = 128, P = 16;
  Job job(T, D, P, 8);
  const int xt = 3, xd = 77, xp = 9;
  const int hung = job.Rank(xt, xd, xp);
  for (int s = 0; s < P; ++s) {
    for (int d = 0; d < D; ++d) {
      for (int t = 0; t < T; ++t) {
        const int r = job.Rank(t, d, s);
        if (r == hung) {
          job.Set(r, job.DpComm(t, s), 11, 10, 10, 6000);
        } else if (t == xt && s == xp) {
          job.Set(r, job.DpComm(t, s), 11, 11, 10, 5000);
        } else if (t == xt) {
          job.Set(r, job.PpComm(t, d), 21, 21, 20, 4000, s < xp ? proto::OpKind::kSend : proto::OpKind::kRecv,
                  s < xp ? s + 1 : s - 1);
        } else {
          job.Set(r, job.TpComm(d, s), 11, 11, 10, 3000);
        }
      }
    }
  }
  WindowReads reads;
  reads.Rebuild(job.membership);
  // Rank 0 (tp 0, dp 0, pp 0) times out in its tp allreduce.
  std::vector<proto::Event> events = {TimeoutOf(job, 0, job.TpComm(0, 0), Job::kNow - 900)};
  // Read as the master does: the needed tables, until none is missing.
  std::vector<proto::RankProgress> tables;
  for (int round = 0; round < 16; ++round) {
    WindowReads::Plan plan = reads.Make(tables, events);
    if (plan.needed.empty()) break;
    for (int r : plan.needed) tables.push_back(job.Progress(r));
  }
  WindowReads::Plan plan = reads.Make(tables, events);
  EXPECT_TRUE(plan.needed.empty());
  // tp group of rank 0 (8), the tp-3 pipeline of dp 0 (16), the dp group at stage 9 (128).
  EXPECT_EQ(plan.members.size(), 8u + 15u + 127u);
  std::vector<proto::Membership> members = reads.MembershipOf(plan.members);
  AttributionInput in;
  in.progress = tables;
  in.membership = members;
  in.events = events;
  in.now_unix_ms = Job::kNow;
  EXPECT_TRUE(WindowCanClose(in, 1000));
  std::vector<proto::Incident> incidents = Attribute(in);
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].kind, "hang");
  ASSERT_EQ(incidents[0].suspects.size(), 1u);
  EXPECT_EQ(incidents[0].suspects[0].rank, hung);
  EXPECT_NE(incidents[0].suspects[0].why.find("compute hang"), std::string::npos);
}

}  // namespace
}  // namespace ft::master

#include "ftmaster/core/topology.h"

#include <gtest/gtest.h>

#include "ftmaster/core/tests/job_fixture.h"

namespace ft::master {
namespace {

using testing::Job;

TEST(TopologyTest, ParsesSizesInAnyOrderWithMegatronRankOrder) {
  Topology t;
  ASSERT_TRUE(Topology::Parse("dp=2, tp=2,pp=2", "", 8, &t).ok());
  EXPECT_TRUE(t.known());
  EXPECT_FALSE(t.inferred());
  EXPECT_EQ(t.tp(), 2);
  EXPECT_EQ(t.dp(), 2);
  EXPECT_EQ(t.pp(), 2);
  EXPECT_EQ(t.order(), "tp-dp-pp");
  // tp fastest: rank = tp + 2 * (dp + 2 * pp).
  EXPECT_EQ(t.CoordOf(0), (Coord{0, 0, 0}));
  EXPECT_EQ(t.CoordOf(1), (Coord{1, 0, 0}));
  EXPECT_EQ(t.CoordOf(2), (Coord{0, 1, 0}));
  EXPECT_EQ(t.CoordOf(5), (Coord{1, 0, 1}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(t.RankOf(t.CoordOf(r)), r);
  EXPECT_EQ(t.ShardRanks(1, 1), (std::vector<int>{5, 7}));
  EXPECT_EQ(t.Describe(), "explicit: tp=2 dp=2 pp=2, order tp-dp-pp, 8 ranks");
}

TEST(TopologyTest, OtherOrdersAndMissingDimensions) {
  Topology t;
  ASSERT_TRUE(Topology::Parse("tp=4,pp=2", "pp-tp-dp", -1, &t).ok());
  EXPECT_EQ(t.world_size(), 8);
  EXPECT_EQ(t.dp(), 1);
  EXPECT_EQ(t.CoordOf(1), (Coord{0, 0, 1}));  // pp varies fastest
  EXPECT_EQ(t.CoordOf(2), (Coord{1, 0, 0}));
  ASSERT_TRUE(Topology::Parse("dp=8", "", 8, &t).ok());
  EXPECT_EQ(t.ShardRanks(0, 0), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(TopologyTest, ClearErrors) {
  Topology t;
  Status s = Topology::Parse("dp=3,tp=2", "", 8, &t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tp*dp*pp = 6 ranks but the job has 8"), std::string::npos) << s.ToString();
  s = Topology::Parse("dp=2,cp=2", "", -1, &t);
  EXPECT_NE(s.message().find("\"cp=2\" is not tp=N"), std::string::npos) << s.ToString();
  s = Topology::Parse("dp=0", "", -1, &t);
  EXPECT_NE(s.message().find("dp must be a positive integer"), std::string::npos) << s.ToString();
  s = Topology::Parse("dp=2x", "", -1, &t);
  EXPECT_NE(s.message().find("positive integer, got \"2x\""), std::string::npos) << s.ToString();
  s = Topology::Parse("dp=2,dp=2", "", -1, &t);
  EXPECT_NE(s.message().find("sets dp twice"), std::string::npos) << s.ToString();
  s = Topology::Parse("", "", -1, &t);
  EXPECT_NE(s.message().find("empty"), std::string::npos) << s.ToString();
  s = Topology::Parse("dp=2", "tp-dp", -1, &t);
  EXPECT_NE(s.message().find("must name all of tp, dp and pp"), std::string::npos) << s.ToString();
  s = Topology::Parse("dp=2", "tp-tp-pp", -1, &t);
  EXPECT_NE(s.message().find("names tp twice"), std::string::npos) << s.ToString();
  s = Topology::Parse("dp=2", "tp-dp-ep", -1, &t);
  EXPECT_NE(s.message().find("\"ep\" is not tp, dp or pp"), std::string::npos) << s.ToString();
  EXPECT_FALSE(t.known());  // untouched by failures
}

TEST(TopologyTest, InfersTpDpPpFromCommunicators) {
  Job job(2, 2, 2);
  // A world communicator and an irregular model-parallel group (tp x pp) must not confuse it.
  for (auto& m : job.membership) {
    m.comms.push_back(proto::CommMember{0xaaaa, false, m.rank, 8});
    const int mp = m.rank % 2 + 2 * (m.rank / 4);  // {0,1,4,5} and {2,3,6,7}
    m.comms.push_back(proto::CommMember{0xbbbb + static_cast<uint64_t>((m.rank / 2) % 2), false, mp, 4});
  }
  Topology t = Topology::Infer(job.membership);
  ASSERT_TRUE(t.known()) << t.Describe();
  EXPECT_TRUE(t.inferred());
  EXPECT_EQ(t.tp(), 2);
  EXPECT_EQ(t.dp(), 2);
  EXPECT_EQ(t.pp(), 2);
  EXPECT_EQ(t.order(), "tp-dp-pp");
  EXPECT_NE(t.Describe().find("inferred from communicators: tp=2 dp=2 pp=2"), std::string::npos)
      << t.Describe();
  EXPECT_NE(t.Describe().find("ignored 2 irregular"), std::string::npos) << t.Describe();
}

TEST(TopologyTest, InfersPpFromP2pWhereverItSits) {
  // Ranks laid out tp-pp-dp: tp=2 stride 1, pp=2 stride 2 (p2p), dp=2 stride 4.
  std::vector<proto::Membership> ms(8);
  for (int r = 0; r < 8; ++r) {
    ms[r].rank = r;
    ms[r].world_size = 8;
    const int t = r % 2, p = (r / 2) % 2, d = r / 4;
    ms[r].comms.push_back({0x100u + static_cast<uint64_t>(r / 2), false, t, 2});
    ms[r].comms.push_back({0x200u + static_cast<uint64_t>(t + 2 * d), true, p, 2});
    ms[r].comms.push_back({0x300u + static_cast<uint64_t>(r % 4), false, d, 2});
  }
  Topology t = Topology::Infer(ms);
  ASSERT_TRUE(t.known()) << t.Describe();
  EXPECT_EQ(t.order(), "tp-pp-dp");
  EXPECT_EQ(t.CoordOf(6), (Coord{0, 1, 1}));
}

TEST(TopologyTest, InfersPureDataParallel) {
  Job job(1, 8, 1);
  Topology t = Topology::Infer(job.membership);
  ASSERT_TRUE(t.known()) << t.Describe();
  EXPECT_EQ(t.dp(), 8);
  EXPECT_EQ(t.tp(), 1);
  EXPECT_EQ(t.pp(), 1);
  EXPECT_NE(t.note().find("pure data parallel"), std::string::npos) << t.note();
}

// A finished job: its ranks exited and destroyed their communicators, which leaves no grid.
// The topology inferred while they ran is kept, said to be kept; nothing is guessed otherwise.
TEST(TopologyTest, DepartedRanksKeepTheLastInferredTopology) {
  Job job(2, 2, 2);
  const Topology running = Topology::Infer(job.membership);
  ASSERT_TRUE(running.known()) << running.Describe();
  // sizes() and order() are what the master stores; parsed back they place every rank alike.
  Topology restored;
  ASSERT_TRUE(Topology::Parse(running.sizes(), running.order(), 0, &restored).ok());
  for (int r = 0; r < job.world(); ++r) EXPECT_EQ(restored.CoordOf(r), running.CoordOf(r)) << r;
  const Topology last = Topology::Kept(running, "inferred while the ranks ran");
  for (proto::Membership& m : job.membership) {
    m.state = "exited";
    m.comms.clear();
  }
  EXPECT_FALSE(Topology::Infer(job.membership).known());
  const Topology kept = Topology::InferOrKeep(job.membership, &last);
  ASSERT_TRUE(kept.known()) << kept.Describe();
  EXPECT_TRUE(kept.kept());
  EXPECT_TRUE(kept.inferred());
  EXPECT_EQ(kept.sizes(), "tp=2,dp=2,pp=2");
  EXPECT_EQ(kept.CoordOf(5), running.CoordOf(5));
  EXPECT_NE(kept.Describe().find("kept from while the ranks ran: 8 of 8 ranks have left"),
            std::string::npos)
      << kept.Describe();
  // Without an earlier inference, or with every rank still running, nothing is kept.
  EXPECT_FALSE(Topology::InferOrKeep(job.membership, nullptr).known());
  for (proto::Membership& m : job.membership) m.state = "running";
  EXPECT_FALSE(Topology::InferOrKeep(job.membership, &last).known());
}

TEST(TopologyTest, HonestAboutWhatItCannotTell) {
  Job pp_dp(1, 4, 2);  // pp plus one more dimension: tp or dp?
  Topology t = Topology::Infer(pp_dp.membership);
  EXPECT_FALSE(t.known());
  EXPECT_NE(t.Describe().find("cannot tell tp from dp"), std::string::npos) << t.Describe();

  Job partial(2, 2, 2);
  partial.membership.pop_back();
  t = Topology::Infer(partial.membership);
  EXPECT_FALSE(t.known());
  EXPECT_NE(t.Describe().find("membership from 7 of 8 ranks"), std::string::npos) << t.Describe();

  std::vector<proto::Membership> irregular(6);
  for (int r = 0; r < 6; ++r) {
    irregular[r].rank = r;
    irregular[r].world_size = 6;
    const int groups[6] = {0, 1, 1, 0, 2, 2};  // {0,3} {1,2} {4,5}: strides differ
    const int ranks_in[6] = {0, 1, 0, 1, 0, 1};
    irregular[r].comms.push_back({0x500u + static_cast<uint64_t>(groups[r]), false, ranks_in[r], 2});
  }
  t = Topology::Infer(irregular);
  EXPECT_FALSE(t.known());
  EXPECT_NE(t.Describe().find("no clean tp/dp/pp grid"), std::string::npos) << t.Describe();

  EXPECT_FALSE(Topology::Infer({}).known());
}

}  // namespace
}  // namespace ft::master

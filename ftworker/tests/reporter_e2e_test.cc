// Reporter against a real redis-server: what it writes for membership (docs/redis-schema.md).
#include "ftworker/reporter.h"

#include <gtest/gtest.h>

#include <chrono>

#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "redis/client.h"
#include "redis/tests/redis_test.h"

namespace ft::worker {
namespace {

using namespace std::chrono_literals;

class ReporterE2eTest : public redis::testing::RedisClientTest {
 protected:
  // ft:{J}:ranks:version as an integer, -1 when absent.
  int64_t Version() {
    redis::Reply r;
    Status s = client_.Run({"GET", keys_.RanksVersion()}, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    int64_t v = -1;
    if (r.is_string()) {
      EXPECT_TRUE(r.ToInt(&v)) << r.str();
    }
    return v;
  }

  static proto::Membership Member(int rank, const std::string& state) {
    proto::Membership m;
    m.rank = rank;
    m.node = "n0";
    m.state = state;
    m.comms.push_back({0x1234, false, rank, 2});
    return m;
  }

  proto::Keys keys_{"job"};
};

// The master re-reads the membership hash only when ranks:version moved: every write of a
// membership value bumps it, and an unchanged value is neither written nor bumps it.
TEST_F(ReporterE2eTest, MembershipWritesBumpTheRanksVersion) {
  Reporter reporter(keys_, "n0", 100);
  reporter.SetMembership(Member(0, "running"));
  reporter.SetMembership(Member(1, "running"));
  ASSERT_TRUE(reporter.Flush(client_).ok());
  const int64_t first = Version();
  EXPECT_GE(first, 1);
  redis::Reply r;
  ASSERT_TRUE(client_.Run({"HGET", keys_.Ranks(), "1"}, &r).ok());
  ASSERT_TRUE(r.is_string());
  proto::Membership back;
  ASSERT_TRUE(proto::Decode(r.str(), &back).ok());
  EXPECT_EQ(back.rank, 1);

  reporter.SetMembership(Member(1, "running"));  // unchanged
  ASSERT_TRUE(reporter.Flush(client_).ok());
  EXPECT_EQ(Version(), first);

  reporter.SetMembership(Member(1, "exited"));
  ASSERT_TRUE(reporter.Flush(client_).ok());
  EXPECT_GT(Version(), first);
  ASSERT_TRUE(client_.Run({"HGET", keys_.Ranks(), "1"}, &r).ok());
  ASSERT_TRUE(proto::Decode(r.str(), &back).ok());
  EXPECT_EQ(back.state, "exited");
}

proto::CkptCopy CopyOn(int64_t step, int rank, const std::string& node, bool buddy) {
  proto::CkptCopy c;
  c.step = step;
  c.rank = rank;
  c.node = node;
  c.digest = 0xabc;
  c.buddy = buddy;
  c.tiers = {buddy ? "replica" : "arena"};
  return c;
}

// Buddy copies (docs/redis-schema.md, "Buddy copies"): ft:{J}:ckpt:<step>:buddy, field = rank.
// A step stays in ckpt:steps while either of its hashes holds a copy; a holder removes only a
// field that still names it (the ring moved and another node took the rank over).
TEST_F(ReporterE2eTest, BuddyCopiesKeepTheirStepAndAreRemovedOnlyByTheirHolder) {
  Reporter own(keys_, "n0", 100), first(keys_, "n1", 100), second(keys_, "n2", 100);
  own.SetCkptCopy(CopyOn(5, 2, "n0", false));
  first.SetBuddyCopy(CopyOn(5, 2, "n1", true));
  ASSERT_TRUE(own.Flush(client_).ok());
  ASSERT_TRUE(first.Flush(client_).ok());
  auto field = [&](const std::string& key) -> std::string {
    redis::Reply r;
    EXPECT_TRUE(client_.Run({"HGET", key, "2"}, &r).ok());
    return r.is_string() ? r.str() : "";
  };
  auto in_steps = [&] {
    redis::Reply r;
    EXPECT_TRUE(client_.Run({"ZSCORE", keys_.CkptSteps(), "5"}, &r).ok());
    return !r.is_nil();
  };
  proto::CkptCopy back;
  ASSERT_TRUE(proto::Decode(field(keys_.CkptBuddy(5)), &back).ok());
  EXPECT_TRUE(back.buddy);
  EXPECT_EQ(back.node, "n1");
  EXPECT_EQ(keys_.CkptBuddy(5), keys_.CkptStep(5) + ":buddy");

  // The rank's own copy goes: the buddy copy keeps the step listed.
  own.RemoveCkptCopy(5, 2);
  ASSERT_TRUE(own.Flush(client_).ok());
  EXPECT_EQ(field(keys_.CkptStep(5)), "");
  EXPECT_TRUE(in_steps());

  // n2 now holds rank 2's copy; n1's late removal leaves n2's field alone.
  second.SetBuddyCopy(CopyOn(5, 2, "n2", true));
  ASSERT_TRUE(second.Flush(client_).ok());
  first.RemoveBuddyCopy(5, 2);
  ASSERT_TRUE(first.Flush(client_).ok());
  ASSERT_TRUE(proto::Decode(field(keys_.CkptBuddy(5)), &back).ok());
  EXPECT_EQ(back.node, "n2");
  EXPECT_TRUE(in_steps());

  second.RemoveBuddyCopy(5, 2);
  ASSERT_TRUE(second.Flush(client_).ok());
  EXPECT_EQ(field(keys_.CkptBuddy(5)), "");
  EXPECT_FALSE(in_steps()) << "neither hash holds a copy of step 5";
}

}  // namespace
}  // namespace ft::worker

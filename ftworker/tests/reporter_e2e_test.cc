// Reporter against a real redis-server: what it writes for membership (docs/redis-schema.md).
#include "ftworker/reporter.h"

#include <gtest/gtest.h>

#include <chrono>

#include "proto/codec.h"
#include "redis/client.h"
#include "redis/tests/redis_server.h"

namespace ft::worker {
namespace {

using namespace std::chrono_literals;

class ReporterE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = server_.Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = client_.Connect(server_.endpoint(), 1000ms);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

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

  redis::testing::RedisServer server_;
  redis::Client client_;
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

}  // namespace
}  // namespace ft::worker

// The master's published values meet their readers through the in-memory Redis: what
// PublishPlan / PublishTimeouts write reads back whole through GetPlan / GetTimeouts, the version
// key says the value's version, and the notify stream holds the notice of its kind.
#include "schema/published.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/notice.h"
#include "redis/fake/fake_store.h"

namespace ft::schema {
namespace {

// The kinds of the notices in the job's notify stream, oldest first.
std::vector<proto::NoticeKind> NoticeKinds(redis::FakeRedis& server, const proto::Keys& keys) {
  std::vector<proto::NoticeKind> kinds;
  redis::Reply entries = server.Execute({"XRANGE", keys.Notify(), "-", "+"});
  for (size_t i = 0; i < entries.size(); ++i) {
    const redis::Reply& fields = entries[i][1];
    std::vector<std::string> flat;
    for (size_t f = 0; f < fields.size(); ++f) flat.push_back(fields[f].str());
    proto::Notice notice;
    if (proto::ParseNotice(flat, &notice).ok()) kinds.push_back(notice.kind);
  }
  return kinds;
}

void RunBatch(redis::FakeRedis& server, const std::vector<redis::Argv>& batch) {
  for (const redis::Argv& argv : batch) ASSERT_FALSE(server.Execute(argv).is_error()) << argv[0];
}

TEST(PublishedTest, APlanReadsBackWithItsVersionAndItsNotice) {
  redis::FakeRedis server;
  const proto::Keys keys("j");
  EXPECT_TRUE(server.Execute(GetPlan(keys)).is_nil());  // never published
  proto::RestorePlan plan;
  plan.step = 12;
  plan.version = 7;
  plan.unix_ms = 1700000000000;
  RunBatch(server, PublishPlan(keys, plan));

  redis::Reply value = server.Execute(GetPlan(keys));
  ASSERT_TRUE(value.is_string());
  proto::RestorePlan read;
  ASSERT_TRUE(proto::Decode(value.str(), &read).ok());
  EXPECT_EQ(read, plan);
  EXPECT_EQ(server.Execute(GetPlanVersion(keys)).str(), "7");
  EXPECT_EQ(NoticeKinds(server, keys), std::vector<proto::NoticeKind>{proto::NoticeKind::kRestore});
}

TEST(PublishedTest, ATimeoutTableReadsBackWithItsVersionAndItsNotice) {
  redis::FakeRedis server;
  const proto::Keys keys("j");
  proto::TimeoutTable table;
  table.version = 3;
  table.default_ms = 4500;
  RunBatch(server, PublishTimeouts(keys, table));

  redis::Reply value = server.Execute(GetTimeouts(keys));
  ASSERT_TRUE(value.is_string());
  proto::TimeoutTable read;
  ASSERT_TRUE(proto::Decode(value.str(), &read).ok());
  EXPECT_EQ(read.version, 3u);
  EXPECT_EQ(read.default_ms, 4500);
  EXPECT_EQ(server.Execute(GetTimeoutsVersion(keys)).str(), "3");
  EXPECT_EQ(NoticeKinds(server, keys), std::vector<proto::NoticeKind>{proto::NoticeKind::kTimeouts});
}

}  // namespace
}  // namespace ft::schema

// The Store contract on FakeStore, and the fake's own fault injection.
#include <gtest/gtest.h>

#include "redis/fake/fake_store.h"
#include "redis/tests/store_contract.h"

namespace ft::redis {
namespace {

using namespace ft::redis::testing;

class FakeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(a_.Ensure({}));
    ASSERT_TRUE(b_.Ensure({}));
  }
  FakeRedis server_;
  FakeStore a_{&server_, "a"};
  FakeStore b_{&server_, "b"};
};

TEST_F(FakeStoreTest, FencedRun) { ContractFencedRun(a_, b_, "t:"); }
TEST_F(FakeStoreTest, Lease) { ContractLease(a_, b_, "t:"); }
TEST_F(FakeStoreTest, GatedAppend) { ContractGatedAppend(a_, b_, "t:"); }
TEST_F(FakeStoreTest, StreamsHashesPipelines) { ContractStreams(a_, b_, "t:"); }
TEST_F(FakeStoreTest, SortedSetsAndHlen) { ContractSortedSetsAndHlen(a_, b_, "t:"); }

TEST_F(FakeStoreTest, KeysExpireByTheServersClock) {
  Reply r;
  ASSERT_TRUE(a_.Run({"SET", "k", "v", "PX", "100"}, &r).ok());
  server_.AdvanceMs(99);
  EXPECT_EQ(server_.Get("k").value_or(""), "v");
  server_.AdvanceMs(1);
  EXPECT_FALSE(server_.Get("k").has_value());
  ASSERT_TRUE(a_.Run({"SET", "k", "v", "EX", "1"}, &r).ok());
  bool held = false;
  server_.AdvanceMs(900);
  ASSERT_TRUE(a_.RenewIfHeld("k", "v", 1000, &held).ok());
  EXPECT_TRUE(held);
  server_.AdvanceMs(900);
  EXPECT_TRUE(server_.Exists("k")) << "renewed";
}

TEST_F(FakeStoreTest, FailAfterBreaksTheConnectionUntilTheNextEnsure) {
  Reply r;
  a_.FailAfter(2);
  EXPECT_TRUE(a_.Run({"SET", "x", "1"}, &r).ok());
  EXPECT_TRUE(a_.Run({"SET", "y", "1"}, &r).ok());
  Status s = a_.Run({"SET", "z", "1"}, &r);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(a_.connected());
  EXPECT_FALSE(server_.Exists("z")) << "a failed command was not executed";
  EXPECT_EQ(a_.Run({"GET", "x"}, &r).code(), StatusCode::kUnavailable) << "still down";
  EXPECT_TRUE(a_.Ensure({}));
  EXPECT_TRUE(a_.Run({"SET", "z", "1"}, &r).ok());
  EXPECT_EQ(a_.connects(), 2u);
}

TEST_F(FakeStoreTest, APipelineCutShortReturnsWhatWasExecuted) {
  std::vector<Reply> replies;
  a_.FailAfter(1);
  Status s = a_.PipelinePartial({{"SET", "x", "1"}, {"SET", "y", "1"}, {"SET", "z", "1"}}, &replies);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_TRUE(server_.Exists("x"));
  EXPECT_FALSE(server_.Exists("y"));
}

TEST_F(FakeStoreTest, FailCommandAndDrop) {
  Reply r;
  a_.FailCommand("FENCED", Status::Timeout("injected"));
  bool held = false;
  EXPECT_EQ(a_.FencedRun({"l", "a"}, {{"SET", "x", "1"}}, &held).code(), StatusCode::kTimeout);
  EXPECT_TRUE(a_.connected()) << "a refused command leaves the connection";
  EXPECT_TRUE(a_.Run({"SET", "x", "1"}, &r).ok());
  b_.Drop();
  EXPECT_FALSE(b_.connected());
  EXPECT_FALSE(b_.Ensure({}));
  EXPECT_EQ(b_.Run({"GET", "x"}, &r).code(), StatusCode::kUnavailable);
  b_.Restore();
  EXPECT_TRUE(b_.Ensure({}));
  EXPECT_EQ(Str(b_, {"GET", "x"}), "1");
  server_.FlushAll();
  EXPECT_EQ(Str(b_, {"GET", "x"}), "(nil)");
}

}  // namespace
}  // namespace ft::redis

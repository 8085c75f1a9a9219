// The Store contract on RedisStore over a real redis-server: the Lua scripts of the real
// store agree with the fake (store_fake_test.cc runs the same cases).
#include <gtest/gtest.h>

#include <chrono>

#include "redis/redis_store.h"
#include "redis/tests/redis_test.h"
#include "redis/tests/store_contract.h"

namespace ft::redis {
namespace {

using namespace ft::redis::testing;
using namespace std::chrono_literals;

class RedisStoreTest : public RedisServerTest {
 protected:
  void SetUp() override {
    RedisServerTest::SetUp();
    if (HasFatalFailure()) return;
    a_ = std::make_unique<RedisStore>(server_.endpoint(), ReconnectPolicy{});
    b_ = std::make_unique<RedisStore>(server_.endpoint(), ReconnectPolicy{});
    ASSERT_TRUE(a_->Ensure(Store::Clock::now()));
    ASSERT_TRUE(b_->Ensure(Store::Clock::now()));
  }
  std::unique_ptr<RedisStore> a_, b_;
};

TEST_F(RedisStoreTest, FencedRun) { ContractFencedRun(*a_, *b_, "t:"); }
TEST_F(RedisStoreTest, Lease) { ContractLease(*a_, *b_, "t:"); }
TEST_F(RedisStoreTest, GatedAppend) { ContractGatedAppend(*a_, *b_, "t:"); }
TEST_F(RedisStoreTest, StreamsHashesPipelines) { ContractStreams(*a_, *b_, "t:"); }
TEST_F(RedisStoreTest, SortedSetsAndHlen) { ContractSortedSetsAndHlen(*a_, *b_, "t:"); }

}  // namespace
}  // namespace ft::redis

#include "ftworker/op_names.h"

#include <gtest/gtest.h>

#include "ftworker/process_probe.h"

namespace ft::worker {
namespace {

TEST(OpNames, KindsAndBuckets) {
  EXPECT_EQ(OpName(1), "allreduce");
  EXPECT_EQ(OpName(3), "reducescatter");
  EXPECT_EQ(OpName(10), "send");
  EXPECT_EQ(OpName(11), "recv");
  EXPECT_EQ(OpName(99), "op99");
  EXPECT_EQ(BucketOf(0), 0);
  EXPECT_EQ(BucketOf(64 * 1024 - 1), 0);
  EXPECT_EQ(BucketOf(64 * 1024), 1);
  EXPECT_EQ(BucketOf(1 << 20), 2);
  EXPECT_EQ(BucketOf(16 << 20), 3);
  EXPECT_EQ(BucketOf(256ull << 20), 4);
  EXPECT_EQ(CommHex(0x3fa2), "0000000000003fa2");
}

TEST(OpNames, ApiCallsFromTheDefLists) {
  EXPECT_STREQ(ApiLibraryName(1), "cudart");
  EXPECT_STREQ(ApiLibraryName(2), "nccl");
  EXPECT_EQ(ApiCallName(1, 0), "__cudaLaunchKernel");
  EXPECT_EQ(ApiCallName(2, 0), "ncclAllReduce");
  EXPECT_EQ(ApiCallName(2, 100000), "#100000");
  EXPECT_EQ(ApiCallName(7, 3), "#3");
}

TEST(ProcStat, ParsesNamesWithSpacesAndParens) {
  auto s = ParseProcStat("42 (python (x) y) S 1 42 42 0 -1 4194560 1 0 0 0 17 5 0 0 20 0 1 0 "
                         "12345 1000 10 18446744073709551615\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->cpu_ticks, 22u);
  EXPECT_EQ(s->start_ticks, 12345u);
  EXPECT_FALSE(ParseProcStat("garbage"));
  EXPECT_FALSE(ParseProcStat("1 (x) S 1 2"));
}

TEST(ProcStat, OwnProcess) {
  auto s = SystemProcessProbe()->ReadStat(getpid());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, 'R');
  EXPECT_TRUE(SystemProcessProbe()->PidExists(getpid()));
  EXPECT_GT(SystemProcessProbe()->BootTimeUnixS(), 0);
}

}  // namespace
}  // namespace ft::worker

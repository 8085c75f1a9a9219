// Runs the ftdump binary on a live segment and on garbage: it must show the in-flight op and
// reject what is not a segment, with a message and a non-zero exit.
#include <sys/mman.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "shm/comm_table.h"
#include "shm/ring.h"
#include "shm/tests/test_segment.h"

namespace ft::shm {
namespace {

int RunFtdump(const std::string& args, std::string* output) {
  std::string command = std::string(FTDUMP_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  output->clear();
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) output->append(buf, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(FtdumpTest, ShowsIdentityInFlightOpAndRecords) {
  ScopedSegment seg;
  CommTableWriter table(seg.writer());
  uint32_t slot = *table.Claim(0xabcdef, 1, 4, 3);
  table.EnterOp(slot, 12, 1, 1 << 20, -1, 1);
  table.Completed(slot, 11, 1, 5);
  RingWriter ring(seg.writer());
  Record r{};
  r.type = 9;
  r.seq = 12;
  ASSERT_TRUE(ring.Push(r));
  std::string out;
  ASSERT_EQ(RunFtdump("--records 5 " + seg.name(), &out), 0) << out;
  EXPECT_NE(out.find("rank=3"), std::string::npos) << out;
  EXPECT_NE(out.find("node=node7"), std::string::npos) << out;
  EXPECT_NE(out.find("state=running"), std::string::npos) << out;
  EXPECT_NE(out.find("comm 0000000000abcdef rank 1/4: entered=12 started=0 completed=11 IN FLIGHT"),
            std::string::npos) << out;
  EXPECT_NE(out.find("record type=9"), std::string::npos) << out;
  EXPECT_EQ(out.find("blocked in a synchronizing call"), std::string::npos) << out;
  // Looking consumed nothing.
  EXPECT_EQ(seg.writer().control()->ring_tail.load(), 0u);
}

TEST(FtdumpTest, ShowsAThreadBlockedInASynchronizingCall) {
  ScopedSegment seg;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
  seg.writer().header()->blocked_count.store(1);
  seg.writer().header()->blocked_since_ns.store(now - 3000000000ull);
  std::string out;
  ASSERT_EQ(RunFtdump(seg.name(), &out), 0) << out;
  EXPECT_NE(out.find("blocked in a synchronizing call for 3."), std::string::npos) << out;
}

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// A hang is measured by its oldest pending op, not by the newest one entered.
TEST(FtdumpTest, InFlightShowsTheOldestPendingOpsAge) {
  ScopedSegment seg;
  CommTableWriter table(seg.writer());
  uint32_t slot = *table.Claim(0xabcdef, 1, 4, 3);
  uint64_t now = NowNs();
  table.Completed(slot, 9, now - 40000000000ull, 5);
  table.EnterOp(slot, 12, 1, 1 << 20, -1, now - 1000000000ull);  // the newest: 1 s old
  table.OldestPending(slot, 10, now - 30000000000ull);            // the oldest: 30 s old
  std::string out;
  ASSERT_EQ(RunFtdump(seg.name(), &out), 0) << out;
  EXPECT_NE(out.find("IN FLIGHT op=1 bytes=1048576 for 30."), std::string::npos) << out;
  EXPECT_NE(out.find("(oldest pending: #10)"), std::string::npos) << out;

  // Only a later op's entry time known: a bound, said as one.
  table.OldestPending(slot, 11, now - 20000000000ull);
  ASSERT_EQ(RunFtdump(seg.name(), &out), 0) << out;
  EXPECT_NE(out.find("for 20."), std::string::npos) << out;
  EXPECT_NE(out.find("s or more (oldest pending: #10, entered before #11)"), std::string::npos) << out;

  // None known (an older producer): the newest entered, named as such.
  table.OldestPending(slot, 0, 0);
  ASSERT_EQ(RunFtdump(seg.name(), &out), 0) << out;
  EXPECT_NE(out.find("for 1."), std::string::npos) << out;
  EXPECT_NE(out.find("since the newest entered, #12"), std::string::npos) << out;
}

TEST(FtdumpTest, RejectsGarbageAndUnknownFlags) {
  std::string name = "/ft." + UniqueTestJob() + ".r0.p1";
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 20000), 0);
  close(fd);
  std::string out;
  EXPECT_EQ(RunFtdump(name, &out), 1);
  EXPECT_NE(out.find("Corrupt: " + name + ": bad magic"), std::string::npos) << out;
  shm_unlink(name.c_str());
  EXPECT_EQ(RunFtdump("--bogus", &out), 2);
  EXPECT_NE(out.find("unknown flag"), std::string::npos) << out;
}

}  // namespace
}  // namespace ft::shm

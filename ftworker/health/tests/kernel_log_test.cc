#include "ftworker/health/kernel_log.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include <gtest/gtest.h>

namespace ft::worker::health {
namespace {

constexpr int64_t kBoot = 1'700'000'000'000;

TEST(KernelLogParseTest, NvrmXidLinesNameTheGpuAndTheClass) {
  auto s = ParseKernelLogRecord("3,1234,5000000,-;NVRM: Xid (PCI:0000:3B:00): 79, pid=4321, name=python3, "
                                "GPU has fallen off the bus.", kBoot);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, "xid");
  EXPECT_EQ(s->value, 79);
  EXPECT_EQ(s->device, "0000:3b:00.0");
  EXPECT_EQ(s->pid, 4321);
  EXPECT_TRUE(s->critical);
  EXPECT_EQ(s->source, "kmsg");
  EXPECT_EQ(s->unix_ms, kBoot + 5000);
  EXPECT_NE(s->detail.find("fallen off the bus"), std::string::npos);

  s = ParseKernelLogRecord("4,99,17,-;NVRM: Xid (PCI:0000:2a:00): 13, pid='<unknown>', name=<unknown>, "
                           "Graphics Exception", kBoot);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->value, 13);
  EXPECT_FALSE(s->critical) << "an application's Xid";
  EXPECT_EQ(s->pid, 0);
}

TEST(KernelLogParseTest, MachineChecksAndOomKills) {
  auto mce = ParseKernelLogRecord("2,5,100,-;mce: [Hardware Error]: Machine check events logged", kBoot);
  ASSERT_TRUE(mce.has_value());
  EXPECT_EQ(mce->kind, "mce");
  EXPECT_EQ(mce->device, "host");
  EXPECT_TRUE(mce->critical);
  auto oom = ParseKernelLogRecord("3,6,200,-;Out of memory: Killed process 777 (python3) total-vm:1kB", kBoot);
  ASSERT_TRUE(oom.has_value());
  EXPECT_EQ(oom->kind, "oom-kill");
  EXPECT_EQ(oom->pid, 777);
  EXPECT_FALSE(oom->critical);
}

TEST(KernelLogParseTest, EverythingElseIsNothing) {
  for (const char* r : {"", ";", "6,1,2,-;eth0: link up", "garbage", "3,1,x,-;NVRM: Xid (PCI:0000:3b:00): 79,",
                        "3,1,5,-;NVRM: Xid (PCI:0000:3b:00", "3,1,5,-;NVRM: Xid (PCI:zz): 79, x",
                        "3,1,5,-;NVRM: Xid (PCI:0000:3b:00): -4, x", "3,1,5,-;Out of memory: Killed process x",
                        "3,1,-5,-;mce: [Hardware Error]: x"}) {
    EXPECT_FALSE(ParseKernelLogRecord(r, kBoot).has_value()) << r;
  }
}

// Random and mutated records: never a crash or an out-of-bounds read (ASan's build checks the
// latter), and a parse is always one of the three kinds.
TEST(KernelLogParseTest, FuzzedRecordsNeverCrash) {
  const std::string seeds[] = {"3,1234,5000000,-;NVRM: Xid (PCI:0000:3B:00): 79, pid=4321, name=x, y",
                               "2,5,100,-;mce: [Hardware Error]: Machine check events logged",
                               "3,6,200,-;Out of memory: Killed process 777 (python3)"};
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    std::string r = seeds[static_cast<size_t>(i) % 3];
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !r.empty(); ++e) {
      const size_t at = rng() % r.size();
      switch (rng() % 3) {
        case 0: r[at] = static_cast<char>(rng()); break;
        case 1: r.erase(at, 1 + rng() % 8); break;
        default: r.insert(at, 1, static_cast<char>(rng())); break;
      }
    }
    if (auto s = ParseKernelLogRecord(r, kBoot)) {
      EXPECT_TRUE(s->kind == "xid" || s->kind == "mce" || s->kind == "oom-kill") << s->kind;
      EXPECT_LE(s->detail.size(), 200u);
    }
  }
}

class KernelLogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ft-kmsg-XXXXXX";
    int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = tmpl;
  }
  void TearDown() override { unlink(path_.c_str()); }
  void Append(const std::string& text) { std::ofstream(path_, std::ios::app) << text; }
  std::string path_;
};

TEST_F(KernelLogFileTest, ReadsOnlyWhatIsAppendedAndKeepsAPartialLine) {
  Append("3,1,10,-;NVRM: Xid (PCI:0000:18:00): 48, pid=1, name=a, old\n");
  std::unique_ptr<KernelLog> log;
  ASSERT_TRUE(KernelLog::Open(path_, &log).ok());
  EXPECT_TRUE(log->Poll().empty()) << "what was there before Open is not read";
  Append("6,2,20,-;something else\n SUBSYSTEM=pci\n3,3,30,-;NVRM: Xid (PCI:0000:2a:00): 79, pid=9, name=b,");
  EXPECT_TRUE(log->Poll().empty()) << "the Xid line is not complete yet";
  Append(" GPU has fallen off the bus.\n");
  std::vector<proto::HwSignal> s = log->Poll();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].value, 79);
  EXPECT_EQ(s[0].device, "0000:2a:00.0");
  EXPECT_TRUE(log->Poll().empty());
}

TEST(KernelLogOpenTest, AnUnopenablePathIsAClearError) {
  std::unique_ptr<KernelLog> log;
  Status s = KernelLog::Open("/nonexistent/kmsg", &log);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/kmsg"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ft::worker::health

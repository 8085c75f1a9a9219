#include "ftworker/health/kernel_log.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>

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

TEST(KernelLogParseTest, XidLinesAsDriversWriteThem) {
  struct Case {
    const char* record;
    int64_t xid;
    const char* bus;
    int pid;
    bool critical;
  };
  for (const Case& c : {
           Case{"3,2001,1000000,-;NVRM: Xid (PCI:0000:b5:00): 48, pid=2211, name=python, An uncorrectable "
                "double bit error (DBE) has been detected on GPU in the framebuffer at partition 6.",
                48, "0000:b5:00.0", 2211, true},
           Case{"4,2002,2000000,-;NVRM: Xid (PCI:0000:1A:00): 31, pid=9, name=pt_main_thread, Ch 00000008, "
                "intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1c_00000000.",
                31, "0000:1a:00.0", 9, false},
           Case{"3,2003,3000000,-;NVRM: Xid (PCI:0000:3b:00): 94, pid=1, name=x, Contained ECC error.", 94,
                "0000:3b:00.0", 1, true},
           Case{"3,2004,4000000,-;NVRM: Xid (PCI:0000:db:00): 74, NVLink: fatal error detected on link 3",
                74, "0000:db:00.0", 0, true},
           Case{"3,2005,5000000,-;NVRM: Xid (0000:83:00): 63, ECC page retirement", 63, "0000:83:00.0", 0,
                false},  // an older driver: no "PCI:"
       }) {
    auto s = ParseKernelLogRecord(c.record, kBoot);
    ASSERT_TRUE(s.has_value()) << c.record;
    EXPECT_EQ(s->kind, "xid");
    EXPECT_EQ(s->value, c.xid) << c.record;
    EXPECT_EQ(s->device, c.bus) << c.record;
    EXPECT_EQ(s->pid, c.pid) << c.record;
    EXPECT_EQ(s->critical, c.critical) << c.record;
    EXPECT_EQ(s->total, 0);
    EXPECT_TRUE(s->ranks.empty()) << "the caller fills them";
  }
}

TEST(KernelLogParseTest, TheOomSummaryLineAndCgroupKills) {
  auto summary = ParseKernelLogRecord("6,7,300,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
                                      "mems_allowed=0-1,oom_memcg=/job,task_memcg=/job/r3,task=python3,pid=4242,"
                                      "uid=1000", kBoot);
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->kind, "oom-kill");
  EXPECT_EQ(summary->pid, 4242);
  EXPECT_EQ(summary->device, "host");
  auto cgroup = ParseKernelLogRecord("3,8,301,-;Memory cgroup out of memory: Killed process 4242 (python3) "
                                     "total-vm:81234567kB, anon-rss:7654321kB, file-rss:0kB", kBoot);
  ASSERT_TRUE(cgroup.has_value());
  EXPECT_EQ(cgroup->pid, 4242);
  EXPECT_EQ(cgroup->unix_ms, kBoot);
}

TEST(KernelLogParseTest, TheDetailIsTheMessageBounded) {
  const std::string tail(500, 'y');
  auto s = ParseKernelLogRecord("2,5,1500,-;mce: [Hardware Error]: " + tail + "\n", kBoot);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->detail.size(), 200u);
  EXPECT_EQ(s->detail.rfind("mce: [Hardware Error]: yyy", 0), 0u) << "the message, not the prefix";
  EXPECT_EQ(s->unix_ms, kBoot + 1);
}

TEST(KernelLogParseTest, EverythingElseIsNothing) {
  for (const char* r : {"", ";", "6,1,2,-;eth0: link up", "garbage", "3,1,x,-;NVRM: Xid (PCI:0000:3b:00): 79,",
                        "3,1,5,-;NVRM: Xid (PCI:0000:3b:00", "3,1,5,-;NVRM: Xid (PCI:zz): 79, x",
                        "3,1,5,-;NVRM: Xid (PCI:0000:3b:00): -4, x", "3,1,5,-;Out of memory: Killed process x",
                        "3,1,-5,-;mce: [Hardware Error]: x", "3,1,5,-;oom-kill:task=python3,uid=0",
                        "6,3,5,-;NVRM: GPU at PCI:0000:3b:00: GPU-0e8c6b1a", "3,1,5,-;NVRM: Xid (PCI:0000:3b:00) 79",
                        "mce: [Hardware Error]: no prefix"}) {
    EXPECT_FALSE(ParseKernelLogRecord(r, kBoot).has_value()) << r;
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

TEST_F(KernelLogFileTest, OneOomKillIsOneSignalThoughTheKernelWritesTwoLines) {
  std::unique_ptr<KernelLog> log;
  ASSERT_TRUE(KernelLog::Open(path_, &log).ok());
  Append("6,10,1000000,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),task=python3,pid=777,uid=0\n");
  std::vector<proto::HwSignal> s = log->Poll();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].pid, 777);
  Append("3,11,1000100,-;Out of memory: Killed process 777 (python3) total-vm:1kB\n");
  EXPECT_TRUE(log->Poll().empty()) << "the same kill, its second line in the next poll";
  Append("3,12,2000000,-;Out of memory: Killed process 778 (python3) total-vm:1kB\n");
  s = log->Poll();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].pid, 778);
}

TEST_F(KernelLogFileTest, ALineTooLongToBeARecordIsDroppedWhole) {
  std::unique_ptr<KernelLog> log;
  ASSERT_TRUE(KernelLog::Open(path_, &log).ok());
  // Its tail would parse as an Xid were it read as a line of its own.
  Append(std::string(3 * KernelLog::kMaxLineBytes, 'z') + "3,1,5,-;NVRM: Xid (PCI:0000:3b:00): 79, x\n");
  EXPECT_TRUE(log->Poll().empty());
  Append("3,2,6,-;NVRM: Xid (PCI:0000:3b:00): 48, x\n");
  std::vector<proto::HwSignal> s = log->Poll();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].value, 48);
}

TEST_F(KernelLogFileTest, APollReadsABoundedNumberOfRecords) {
  std::unique_ptr<KernelLog> log;
  ASSERT_TRUE(KernelLog::Open(path_, &log).ok());
  std::string many;
  for (int i = 0; i < 2500; ++i) many += "3," + std::to_string(i) + ",5,-;NVRM: Xid (PCI:0000:3b:00): 79, x\n";
  Append(many);
  size_t first = log->Poll().size();
  EXPECT_GE(first, KernelLog::kMaxRecords);
  EXPECT_LT(first, 2500u) << "the rest wait for the next poll";
  size_t total = first;
  for (int i = 0; i < 5; ++i) total += log->Poll().size();
  EXPECT_EQ(total, 2500u);
}

TEST(KernelLogOpenTest, AnUnopenablePathIsAClearError) {
  std::unique_ptr<KernelLog> log;
  Status s = KernelLog::Open("/nonexistent/kmsg", &log);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/kmsg"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ft::worker::health

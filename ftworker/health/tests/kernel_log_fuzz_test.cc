// ParseKernelLogRecord on random and mutated records (tests/util/mutate.h, the project's one
// mutator, with the kmsg grammar's tokens): never a crash, never a read outside the record
// (each input is copied into a buffer of exactly its size, so ASan's build -- FT_SANITIZE --
// catches a read past its end), and whatever parses keeps the parser's contract. Then every
// prefix of each seed, where an off-by-one in the field walk shows first, and the records that
// once needed a fix.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ftworker/health/kernel_log.h"
#include "ftworker/health/pci_bus_id.h"
#include "ftworker/health/signal_kinds.h"
#include "tests/util/mutate.h"

namespace ft::worker::health {
namespace {

constexpr int64_t kBoot = 1'700'000'000'000;

const std::vector<std::string>& Seeds() {
  static const std::vector<std::string> seeds = {
      "3,1234,5000000,-;NVRM: Xid (PCI:0000:3B:00): 79, pid=4321, name=python3, GPU has fallen off the bus.",
      "4,99,17,-;NVRM: Xid (PCI:0000:2a:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception",
      "3,7,8,-;NVRM: Xid (0000:83:00): 48, An uncorrectable double bit error (DBE) has been detected",
      "2,5,100,-;mce: [Hardware Error]: Machine check events logged",
      "2,6,101,c;mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 5: be00000000800400",
      "3,6,200,-;Out of memory: Killed process 777 (python3) total-vm:1kB, anon-rss:0kB",
      "3,8,199,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
      "global_oom,task_memcg=/,task=python3,pid=777,uid=0",
      "3,9,300,-;Memory cgroup out of memory: Killed process 4242 (torchrun) total-vm:9kB",
  };
  return seeds;
}

// The parse of `record` from a heap copy of exactly its bytes, checked against the contract.
void ParseChecked(const std::string& record) {
  std::unique_ptr<char[]> exact(new char[record.size()]);  // no terminator to read by mistake
  std::memcpy(exact.get(), record.data(), record.size());
  std::optional<proto::HwSignal> s = ParseKernelLogRecord(std::string_view(exact.get(), record.size()), kBoot);
  if (!s) return;
  ASSERT_TRUE(s->kind == kXid || s->kind == kMce || s->kind == kOomKill) << s->kind;
  EXPECT_EQ(s->source, "kmsg");
  EXPECT_LE(s->detail.size(), 200u);
  EXPECT_GE(s->unix_ms, kBoot);
  EXPECT_TRUE(s->ranks.empty());
  EXPECT_EQ(s->critical, IsCritical(s->kind, s->value));
  if (s->kind == kXid) {
    EXPECT_GT(s->value, 0);
    EXPECT_EQ(NormalizePciBusId(s->device), s->device) << "the bus id is normalized";
  } else {
    EXPECT_EQ(s->device, "host");
  }
  if (s->kind == kOomKill) {
    EXPECT_GT(s->pid, 0) << "an OOM kill names its victim";
  }
  EXPECT_GE(s->pid, 0);
}

TEST(KernelLogFuzzTest, MutatedAndRandomRecordsKeepTheContract) {
  test_util::MutateOptions options;
  options.hot_prefix = 24;  // "<prio>,<seq>,<usec>,<flags>;"
  options.tokens = {",", ";", "-", " ", "\n", "(", ")", ":", ".", "=", "PCI:", "NVRM: Xid (", "pid=", ",pid=",
                    "Killed process ", "oom-kill:", "mce: [Hardware Error]", "0000:3b:00",
                    "9223372036854775807", "9223372036854775808", "-1", "2147483648", "0x10",
                    std::string(1, '\0'), "\xff", std::string(300, 'x')};
  options.max_edits = 5;
  test_util::Mutator mutator(20261203, options);
  size_t parsed = 0;
  for (int i = 0; i < 60000; ++i) {
    const std::string& seed = Seeds()[static_cast<size_t>(i) % Seeds().size()];
    const std::string record = i % 10 == 9 ? mutator.RandomBytes(400, seed.substr(0, seed.find(';') + 1))
                                           : mutator.Mutate(seed);
    ParseChecked(record);
    if (::testing::Test::HasFatalFailure()) FAIL() << "record: " << ::testing::PrintToString(record);
    parsed += ParseKernelLogRecord(record, kBoot).has_value();
  }
  // Mutations that keep a record's shape must still parse: the mutator reaches past the prefix.
  EXPECT_GT(parsed, 5000u);
  RecordProperty("parsed", static_cast<int>(parsed));
}

TEST(KernelLogFuzzTest, EveryPrefixOfARecordIsSafe) {
  for (const std::string& seed : Seeds()) {
    ASSERT_TRUE(ParseKernelLogRecord(seed, kBoot).has_value()) << seed;
    for (size_t n = 0; n <= seed.size(); ++n) ParseChecked(seed.substr(0, n));
  }
}

// Records that once needed a fix, or sit on a boundary of the parser's walk.
TEST(KernelLogFuzzTest, Regressions) {
  for (const std::string& record : {
           std::string("3,1,5,-;NVRM: Xid (PCI:"),                              // ends in the tag
           std::string("3,1,5,-;NVRM: Xid (PCI:0000:3b:00):"),                  // ends before the number
           std::string("3,1,5,-;NVRM: Xid (PCI:0000:3b:00): 9223372036854775808, x"),  // overflows
           std::string("3,1,5,-;oom-kill:task=x,pid="),                         // a key with no number
           std::string("3,1,5,-;Out of memory: Killed process 99999999999 (x)"),  // a pid past int
           std::string("3,1,9223372036854775807,-;mce: [Hardware Error]: x"),   // the latest time
           std::string("3,1,5,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=") + std::string(1, '\0'),
           std::string(";;;;"), std::string(",,,;"), std::string("\n"),
       }) {
    ParseChecked(record);
  }
  EXPECT_FALSE(ParseKernelLogRecord("3,1,5,-;Out of memory: Killed process 99999999999 (x)", kBoot).has_value());
}

}  // namespace
}  // namespace ft::worker::health

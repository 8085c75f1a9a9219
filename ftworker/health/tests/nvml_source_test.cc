// NvmlSource on gpusim's libnvidia-ml.so.1 (tests/gpusim/nvml), loaded by path. Each test writes
// the stand-in's state file (GPUSIM_NVML_STATE) and changes it between polls.
#include "ftworker/health/nvml_source.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "ftworker/health/signal_kinds.h"

namespace ft::worker::health {
namespace {

using proto::HwSignal;

// gpusim's bus ids (tests/gpusim/cudart/device.cc), as NvmlSource normalizes them.
const std::vector<std::string> kBusIds = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                          "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
                                          "0000:ba:00.0", "0000:db:00.0"};

class NvmlSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ft-nvml-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/state";
    setenv("GPUSIM_NVML_STATE", path_.c_str(), 1);
    unsetenv("GPUSIM_DEVICE_COUNT");
  }
  void TearDown() override {
    source_.reset();
    unsetenv("GPUSIM_NVML_STATE");
    unsetenv("GPUSIM_DEVICE_COUNT");
    std::filesystem::remove_all(dir_);
  }

  // A new file renamed over the old: the stand-in sees every version even when two writes
  // fall in one mtime tick.
  void Write(const std::string& text) {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, path_);
  }

  void Open() {
    Status s = NvmlSource::Open(FT_TEST_GPUSIM_NVML, &source_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::vector<HwSignal> Poll() { return source_->Poll(now_ms_ += 1000); }

  std::string dir_;
  std::string path_;
  std::unique_ptr<NvmlSource> source_;
  int64_t now_ms_ = 1'700'000'000'000;
};

TEST_F(NvmlSourceTest, NamesGpusByTheBusIdsOfGpusimsCudart) {
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_EQ(source_->bus_ids(), kBusIds);
  source_.reset();

  setenv("GPUSIM_DEVICE_COUNT", "10", 1);
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_EQ(source_->bus_ids().size(), 10u);
  EXPECT_EQ(source_->bus_ids()[9], "0000:19:00.0");  // 0x10 + 9
}

TEST_F(NvmlSourceTest, HealthyGpusGiveNothing) {
  Write("# all healthy\n");
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(Poll().empty());
  EXPECT_TRUE(Poll().empty());
}

TEST_F(NvmlSourceTest, Xid79IsOneCriticalSignalAndNotRepeated) {
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(Poll().empty());
  Write("xid 2 79\n");
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].source, "nvml");
  EXPECT_EQ(got[0].device, "0000:3a:00.0");
  EXPECT_EQ(got[0].kind, kXid);
  EXPECT_EQ(got[0].value, 79);
  EXPECT_EQ(got[0].total, 0);
  EXPECT_TRUE(got[0].critical);
  EXPECT_TRUE(got[0].ranks.empty());
  EXPECT_EQ(got[0].unix_ms, now_ms_);
  EXPECT_EQ(got[0].detail, "Xid 79");
  EXPECT_TRUE(Poll().empty());

  // An appended line is one more event; the first is not delivered again.
  Write("xid 2 79\nxid 0 48\n");
  got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].device, "0000:18:00.0");
  EXPECT_EQ(got[0].value, 48);
}

TEST_F(NvmlSourceTest, ApplicationXidIsNotCritical) {
  Write("xid 5 13\n");  // before Open: delivered at the first poll
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].device, "0000:ab:00.0");
  EXPECT_EQ(got[0].value, 13);
  EXPECT_FALSE(got[0].critical);
}

TEST_F(NvmlSourceTest, EccIncreaseIsOneSignalWithDeltaAndTotal) {
  Write("ecc 4 0\n");
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(Poll().empty());
  Write("ecc 4 3\n");
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].device, "0000:9a:00.0");
  EXPECT_EQ(got[0].kind, kEccUncorrected);
  EXPECT_EQ(got[0].value, 3);
  EXPECT_EQ(got[0].total, 3);
  EXPECT_TRUE(got[0].critical);
  EXPECT_EQ(got[0].detail, "volatile uncorrectable ECC errors 0 -> 3");
  EXPECT_TRUE(Poll().empty());
}

TEST_F(NvmlSourceTest, CounterGoingDownIsANewBaseline) {
  Write("retired 3 4\npcie-replay 1 10\nnvlink 7 2 5 5 5\n");
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(Poll().empty());                                // counts at start are history
  Write("retired 3 1\npcie-replay 1 3\nnvlink 7 2 1 0 0\n");  // a driver reload
  EXPECT_TRUE(Poll().empty());
  Write("retired 3 2\npcie-replay 1 3\nnvlink 7 2 1 0 0\n");
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, kRetiredPages);
  EXPECT_EQ(got[0].value, 1);
  EXPECT_EQ(got[0].total, 2);
  EXPECT_TRUE(got[0].critical);
}

TEST_F(NvmlSourceTest, EccAtStartIsReportedOnce) {
  Write("ecc 0 2\n");
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, kEccUncorrected);
  EXPECT_EQ(got[0].value, 2);
  EXPECT_EQ(got[0].total, 2);
  EXPECT_TRUE(Poll().empty());
}

TEST_F(NvmlSourceTest, LostGpuIsReportedOnceThenSkipped) {
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(Poll().empty());
  Write("lost 1\n");
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].device, "0000:2a:00.0");
  EXPECT_EQ(got[0].kind, kGpuLost);
  EXPECT_TRUE(got[0].critical);
  EXPECT_TRUE(Poll().empty());
  Write("lost 1\necc 1 9\n");  // not queried any more
  EXPECT_TRUE(Poll().empty());
}

TEST_F(NvmlSourceTest, GpuLostBeforeOpenIsReportedAtTheFirstPoll) {
  Write("lost 1\n");
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_EQ(source_->bus_ids()[1], "nvml:1");  // NVML gives a lost GPU no handle
  EXPECT_EQ(source_->bus_ids()[2], "0000:3a:00.0");
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].device, "nvml:1");
  EXPECT_EQ(got[0].kind, kGpuLost);
  EXPECT_TRUE(Poll().empty());
}

TEST_F(NvmlSourceTest, RemapPendingAtStartIsReportedAtTheFirstPoll) {
  Write("remap 6 0 1\n");
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].device, "0000:ba:00.0");
  EXPECT_EQ(got[0].kind, kRowRemapPending);
  EXPECT_TRUE(got[0].critical);
  EXPECT_TRUE(Poll().empty());
  Write("remap 6 1 1\n");
  got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, kRowRemapFailure);
}

TEST_F(NvmlSourceTest, HardwareThrottleIsReportedWhenItsReasonsChange) {
  Write("throttle 0 0x1\n");  // idle: how a healthy GPU runs
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(Poll().empty());
  Write("throttle 0 0x41\n");
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, kThrottle);
  EXPECT_EQ(got[0].value, 0x40);  // hardware thermal slowdown; idle is not a hardware reason
  EXPECT_FALSE(got[0].critical);
  EXPECT_TRUE(Poll().empty());
  Write("throttle 0 0xc0\n");
  got = Poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].value, 0xc0);
  Write("throttle 0 0x4\n");  // software power cap only
  EXPECT_TRUE(Poll().empty());
}

TEST_F(NvmlSourceTest, NvlinkAndPcieIncreasesAreSummed) {
  Write("nvlink 7 3 1 0 0\npcie-replay 2 5\n");
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(Poll().empty());
  Write("nvlink 7 3 2 1 0\nnvlink 7 5 0 0 4\npcie-replay 2 8\n");
  std::vector<HwSignal> got = Poll();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].device, "0000:3a:00.0");
  EXPECT_EQ(got[0].kind, kPcieReplay);
  EXPECT_EQ(got[0].value, 3);
  EXPECT_EQ(got[0].total, 8);
  EXPECT_EQ(got[1].device, "0000:db:00.0");
  EXPECT_EQ(got[1].kind, kNvlinkErrors);
  EXPECT_EQ(got[1].value, 6);  // link 3: crc +1, replay +1; link 5: recovery +4
  EXPECT_EQ(got[1].total, 7);
  EXPECT_FALSE(got[1].critical);
}

TEST_F(NvmlSourceTest, AbsentLibraryIsAnErrorNamingIt) {
  const std::string missing = dir_ + "/libnvidia-ml.so.1";
  std::unique_ptr<NvmlSource> source;
  Status s = NvmlSource::Open(missing, &source);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(missing), std::string_view::npos) << s.message();
  EXPECT_EQ(source, nullptr);
}

// The stand-in itself: a malformed line costs only that line.
TEST_F(NvmlSourceTest, StandInSkipsMalformedLinesAndServesTheOthers) {
  Write(
      "bogus 1 2\n"
      "ecc 1\n"
      "ecc 99 3\n"
      "remap 1 2 0\n"
      "nvlink 1 18 1 1 1\n"
      "ecc 1 -4\n"
      "ecc 3 7   # a comment after a good line\n");
  testing::internal::CaptureStderr();
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<HwSignal> got = Poll();
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].device, "0000:5d:00.0");
  EXPECT_EQ(got[0].kind, kEccUncorrected);
  EXPECT_EQ(got[0].value, 7);
  int messages = 0;
  for (size_t at = 0; (at = err.find("skipped malformed line", at)) != std::string::npos; ++at)
    ++messages;
  EXPECT_EQ(messages, 6) << err;
}

}  // namespace
}  // namespace ft::worker::health

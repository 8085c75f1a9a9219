#include "common/log.h"
#include "common/mutex.h"

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ft {
namespace {

class CapturingSink : public LogSink {
 public:
  void Write(std::string_view line) override {
    MutexLock lock(&mu_);
    lines_.emplace_back(line);
  }
  std::vector<std::string> lines() {
    MutexLock lock(&mu_);
    return lines_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> lines_ GUARDED_BY(mu_);
};

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetSink(&sink_);
    ASSERT_TRUE(log::Configure("info", "").ok());
  }
  void TearDown() override {
    log::SetSink(nullptr);
    log::SetRank(-1);
    ASSERT_TRUE(log::Configure("info", "").ok());
  }
  CapturingSink sink_;
};

int g_format_calls = 0;
int CountedArgument() { return ++g_format_calls; }

TEST_F(LogTest, LineCarriesLevelSubsystemHostPidRank) {
  log::SetRank(3);
  FT_LOG(Warn, Shm, "segment {} ignored", "/ft-x");
  auto lines = sink_.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" W ft[shm] host="), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" pid="), std::string::npos);
  EXPECT_NE(lines[0].find(" rank=3: segment /ft-x ignored\n"), std::string::npos) << lines[0];
}

TEST_F(LogTest, DisabledLevelDoesNotFormat) {
  g_format_calls = 0;
  FT_LOG(Debug, Worker, "value {}", CountedArgument());
  EXPECT_EQ(g_format_calls, 0);
  EXPECT_TRUE(sink_.lines().empty());
  FT_LOG(Error, Worker, "value {}", CountedArgument());
  EXPECT_EQ(g_format_calls, 1);
  EXPECT_EQ(sink_.lines().size(), 1u);
}

TEST_F(LogTest, PerSubsystemLevels) {
  ASSERT_TRUE(log::Configure("warn", "shm=debug,master=off").ok());
  FT_LOG(Debug, Shm, "shm debug");
  FT_LOG(Info, Worker, "worker info");
  FT_LOG(Error, Master, "master error");
  FT_LOG(Warn, Rdma, "rdma warn");
  auto lines = sink_.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("shm debug"), std::string::npos);
  EXPECT_NE(lines[1].find("rdma warn"), std::string::npos);
}

TEST_F(LogTest, BadConfigurationIsRejectedWhole) {
  ASSERT_TRUE(log::Configure("error", "").ok());
  EXPECT_FALSE(log::Configure("loud", "").ok());
  EXPECT_FALSE(log::Configure("info", "shm=debug,nosuch=info").ok());
  EXPECT_FALSE(log::Configure("info", "shm").ok());
  // Nothing changed: still "error".
  FT_LOG(Warn, Shm, "dropped");
  EXPECT_TRUE(sink_.lines().empty());
}

TEST_F(LogTest, ConcurrentWritersProduceWholeLines) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) FT_LOG(Info, Common, "thread {} line {}", t, i);
    });
  }
  for (auto& thread : threads) thread.join();
  auto lines = sink_.lines();
  ASSERT_EQ(lines.size(), 800u);
  for (const auto& line : lines) {
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1);
  }
}

}  // namespace
}  // namespace ft

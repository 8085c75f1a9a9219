#include "metrics/exporter.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/util/wait_until.h"

namespace ft::metrics {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(MetricsExporterTest, ListenAddressTakesTheProgramsPortWhenNoneIsGiven) {
  EXPECT_EQ(ListenAddress("", kWorkerPort), "");
  EXPECT_EQ(ListenAddress("127.0.0.1", kWorkerPort), "127.0.0.1:9464");
  EXPECT_EQ(ListenAddress("127.0.0.1", kMasterPort), "127.0.0.1:9465");
  EXPECT_EQ(ListenAddress("[::1]", kMasterPort), "[::1]:9465");
  EXPECT_EQ(ListenAddress("127.0.0.1:0", kWorkerPort), "127.0.0.1:0");
  EXPECT_EQ(ListenAddress("[::1]:80", kWorkerPort), "[::1]:80");
}

TEST(MetricsExporterTest, ServesAndRewritesTheTextfileWithTheRegistrysFigures) {
  char tmpl[] = "/tmp/ft-exporter-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/ft.prom";
  {
    Exporter exporter;
    ASSERT_TRUE(exporter.registry().Declare("ft_x_total", Kind::kCounter, "x", {}).ok());
    ExporterOptions options;
    options.listen = "127.0.0.1:0";
    options.textfile = path;
    options.interval = std::chrono::milliseconds(10);
    ASSERT_TRUE(exporter.Start(options).ok());
    EXPECT_NE(exporter.address(), "");
    EXPECT_NE(exporter.address(), "127.0.0.1:0");
    ASSERT_TRUE(exporter.registry().Add("ft_x_total", {}, 5).ok());
    EXPECT_TRUE(test_util::WaitUntil([&] { return ReadFile(path).find("ft_x_total 5\n") != std::string::npos; }));
    ASSERT_TRUE(exporter.registry().Add("ft_x_total", {}, 1).ok());
    exporter.Stop();  // the last write has the last figures
    EXPECT_NE(ReadFile(path).find("ft_x_total 6\n"), std::string::npos);
  }
  (void)std::system(("rm -rf " + dir).c_str());
}

TEST(MetricsExporterTest, AnAddressInUseIsAnErrorButNotFatal) {
  Exporter first, second;
  ExporterOptions options;
  options.listen = "127.0.0.1:0";
  ASSERT_TRUE(first.Start(options).ok());
  options.listen = first.address();
  EXPECT_EQ(second.Start(options).code(), StatusCode::kUnavailable);
  EXPECT_EQ(second.address(), "");
  options.listen = "";
  Exporter off;
  EXPECT_TRUE(off.Start(options).ok());
  EXPECT_EQ(off.address(), "");
}

// A second job's daemon on one host: its default port is the first one's. It serves on another
// free port of the same host instead of not at all.
TEST(MetricsExporterTest, ATakenDefaultPortMovesToAFreeOne) {
  Exporter first, second;
  ExporterOptions options;
  options.listen = "127.0.0.1:0";
  ASSERT_TRUE(first.Start(options).ok());
  const std::string taken = first.address();
  options.listen = "127.0.0.1";
  options.default_port = static_cast<uint16_t>(std::stoi(taken.substr(taken.rfind(':') + 1)));
  ASSERT_TRUE(second.Start(options).ok());
  EXPECT_NE(second.address(), "");
  EXPECT_NE(second.address(), taken);
  EXPECT_EQ(second.address().rfind("127.0.0.1:", 0), 0u) << second.address();
}

}  // namespace
}  // namespace ft::metrics

#include "metrics/registry.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ft::metrics {
namespace {

TEST(MetricsRegistryTest, RendersHelpTypeAndSeriesInDeclaredLabelOrder) {
  Registry registry;
  ASSERT_TRUE(registry.Declare("ft_worker_ops_total", Kind::kCounter, "Ops completed.",
                               {"rank", "comm", "op"}).ok());
  ASSERT_TRUE(registry.Declare("ft_worker_up", Kind::kGauge, "1 while running.", {}).ok());
  // Inserted out of order: rendered sorted by label values, labels as declared.
  ASSERT_TRUE(registry.Add("ft_worker_ops_total", {"1", "c2", "allreduce"}, 3).ok());
  ASSERT_TRUE(registry.Add("ft_worker_ops_total", {"0", "c1", "allreduce"}, 2).ok());
  ASSERT_TRUE(registry.Add("ft_worker_ops_total", {"0", "c1", "allreduce"}, 5).ok());
  ASSERT_TRUE(registry.Set("ft_worker_up", {}, 1).ok());
  EXPECT_EQ(registry.Render(),
            "# HELP ft_worker_ops_total Ops completed.\n"
            "# TYPE ft_worker_ops_total counter\n"
            "ft_worker_ops_total{rank=\"0\",comm=\"c1\",op=\"allreduce\"} 7\n"
            "ft_worker_ops_total{rank=\"1\",comm=\"c2\",op=\"allreduce\"} 3\n"
            "# HELP ft_worker_up 1 while running.\n"
            "# TYPE ft_worker_up gauge\n"
            "ft_worker_up 1\n");
  EXPECT_EQ(registry.Render(), registry.Render());
}

TEST(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  Registry registry;
  ASSERT_TRUE(registry.Declare("ft_x", Kind::kGauge, "a \\ b\nc \"q\"", {"job"}).ok());
  ASSERT_TRUE(registry.Set("ft_x", {"a\"b\\c\nd"}, 0.5).ok());
  EXPECT_EQ(registry.Render(),
            "# HELP ft_x a \\\\ b\\nc \"q\"\n"
            "# TYPE ft_x gauge\n"
            "ft_x{job=\"a\\\"b\\\\c\\nd\"} 0.5\n");
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry registry;
  ASSERT_TRUE(registry.Declare("ft_master_decide_seconds", Kind::kHistogram, "h", {"kind"},
                               {0.1, 1, 10}).ok());
  for (double v : {0.05, 0.1, 0.5, 2.0, 100.0}) {
    ASSERT_TRUE(registry.Observe("ft_master_decide_seconds", {"hang"}, v).ok());
  }
  EXPECT_EQ(registry.Render(),
            "# HELP ft_master_decide_seconds h\n"
            "# TYPE ft_master_decide_seconds histogram\n"
            "ft_master_decide_seconds_bucket{kind=\"hang\",le=\"0.1\"} 2\n"
            "ft_master_decide_seconds_bucket{kind=\"hang\",le=\"1\"} 3\n"
            "ft_master_decide_seconds_bucket{kind=\"hang\",le=\"10\"} 4\n"
            "ft_master_decide_seconds_bucket{kind=\"hang\",le=\"+Inf\"} 5\n"
            "ft_master_decide_seconds_sum{kind=\"hang\"} 102.65\n"
            "ft_master_decide_seconds_count{kind=\"hang\"} 5\n");
}

TEST(MetricsRegistryTest, FormatsSpecialValues) {
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
}

TEST(MetricsRegistryTest, RefusesBadNamesAndMismatchedUpdates) {
  Registry registry;
  EXPECT_FALSE(registry.Declare("1bad", Kind::kGauge, "", {}).ok());
  EXPECT_FALSE(registry.Declare("ft_ok", Kind::kGauge, "", {"__reserved"}).ok());
  EXPECT_FALSE(registry.Declare("ft_ok", Kind::kGauge, "", {"bad-label"}).ok());
  EXPECT_FALSE(registry.Declare("ft_h", Kind::kHistogram, "", {}, {}).ok());
  EXPECT_FALSE(registry.Declare("ft_h", Kind::kHistogram, "", {}, {2, 1}).ok());
  EXPECT_FALSE(registry.Declare("ft_h", Kind::kHistogram, "", {"le"}, {1}).ok());
  ASSERT_TRUE(registry.Declare("ft_c_total", Kind::kCounter, "", {"rank"}).ok());
  EXPECT_TRUE(registry.Declare("ft_c_total", Kind::kCounter, "", {"rank"}).ok());
  EXPECT_FALSE(registry.Declare("ft_c_total", Kind::kGauge, "", {"rank"}).ok());
  EXPECT_FALSE(registry.Add("ft_c_total", {}, 1).ok());           // arity
  EXPECT_FALSE(registry.Add("ft_c_total", {"0"}, -1).ok());       // counters only go up
  EXPECT_FALSE(registry.Set("ft_c_total", {"0"}, -1).ok());
  EXPECT_FALSE(registry.Observe("ft_c_total", {"0"}, 1).ok());    // not a histogram
  EXPECT_FALSE(registry.Set("ft_undeclared", {}, 1).ok());
  EXPECT_EQ(registry.Render(), "# HELP ft_c_total \n# TYPE ft_c_total counter\n");
}

TEST(MetricsRegistryTest, CounterSetNeverGoesDownAndRemoveDropsASeries) {
  Registry registry;
  ASSERT_TRUE(registry.Declare("ft_c_total", Kind::kCounter, "", {"rank"}).ok());
  ASSERT_TRUE(registry.Set("ft_c_total", {"0"}, 10).ok());
  ASSERT_TRUE(registry.Set("ft_c_total", {"0"}, 4).ok());
  EXPECT_EQ(registry.Value("ft_c_total", {"0"}), 10);
  ASSERT_TRUE(registry.Set("ft_c_total", {"1"}, 1).ok());
  registry.Remove("ft_c_total", {"0"});
  EXPECT_TRUE(std::isnan(registry.Value("ft_c_total", {"0"})));
  EXPECT_EQ(registry.Value("ft_c_total", {"1"}), 1);
  registry.Clear("ft_c_total");
  EXPECT_TRUE(std::isnan(registry.Value("ft_c_total", {"1"})));
}

}  // namespace
}  // namespace ft::metrics

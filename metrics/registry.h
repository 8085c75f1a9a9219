// ft::metrics::Registry: counters, gauges and histograms with label sets, rendered in
// Prometheus' text exposition format 0.0.4 (what /metrics serves and the textfile holds).
//
// A family is declared once (name, kind, help, label names, histogram bounds); its series are
// keyed by their label values, given in the family's label order. Rendering is deterministic:
// families in declaration order, series sorted by label values, labels in declared order, so
// two scrapes of unchanged figures are byte for byte equal.
//
// Thread-safe: one mutex; the owner's loop updates (once per tick), the server thread renders.
// Updates to an undeclared family or with the wrong number of label values are refused with
// kInvalidArgument and change nothing.
#ifndef FT_METRICS_REGISTRY_H_
#define FT_METRICS_REGISTRY_H_

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace ft::metrics {

enum class Kind { kCounter, kGauge, kHistogram };

using LabelValues = std::vector<std::string>;

// Prometheus' number syntax: shortest exact form, "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);
// Escapes for a label value (backslash, double quote, newline) and for HELP text (backslash,
// newline).
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);
// [a-zA-Z_:][a-zA-Z0-9_:]* and [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__").
bool ValidMetricName(std::string_view name);
bool ValidLabelName(std::string_view name);

class Registry {
 public:
  // Declares a family. Declaring it again with the same kind, labels and bounds is a no-op;
  // anything else is kInvalidArgument. Histogram bounds: ascending, finite, at least one
  // (+Inf is implied). A counter's name should end in _total (not enforced).
  Status Declare(std::string_view name, Kind kind, std::string_view help,
                 std::vector<std::string> label_names, std::vector<double> bounds = {});

  // Gauge: value; counter: the cumulative value taken from a source that already counts
  // (refused if negative). A counter never goes down: a smaller value is kept as is, which
  // Prometheus' rate() would read as a reset anyway.
  Status Set(std::string_view name, const LabelValues& labels, double value);
  // Counter or gauge: value += delta (a counter refuses a negative delta).
  Status Add(std::string_view name, const LabelValues& labels, double delta);
  // Histogram: one observation.
  Status Observe(std::string_view name, const LabelValues& labels, double value);
  // Drops one series (a rank that went away), or every series of a family.
  void Remove(std::string_view name, const LabelValues& labels);
  void Clear(std::string_view name);

  // The current value of a counter or gauge series; NaN if absent (tests).
  double Value(std::string_view name, const LabelValues& labels) const;

  // The whole registry in the text format, ending with a newline.
  std::string Render() const;

 private:
  struct Series {
    double value = 0;               // counter, gauge
    std::vector<uint64_t> buckets;  // histogram: observations <= bounds[i] (not cumulative)
    uint64_t count = 0;
    double sum = 0;
  };
  struct Family {
    std::string name;
    Kind kind;
    std::string help;
    std::vector<std::string> label_names;
    std::vector<double> bounds;
    std::map<LabelValues, Series> series;
  };
  Family* FindLocked(std::string_view name) REQUIRES(mu_);
  const Family* FindLocked(std::string_view name) const REQUIRES(mu_);
  Status SeriesLocked(std::string_view name, const LabelValues& labels, Kind want_a,
                      Kind want_b, Series** out, Family** family) REQUIRES(mu_);
  Status ValueSeriesLocked(std::string_view name, const LabelValues& labels, double value,
                           std::string_view what, Series** out, Family** family) REQUIRES(mu_);

  mutable Mutex mu_;
  std::vector<Family> families_ GUARDED_BY(mu_);  // in declaration order
};

}  // namespace ft::metrics

#endif  // FT_METRICS_REGISTRY_H_

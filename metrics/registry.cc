#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "common/mutex.h"
#include "common/names.h"

namespace ft::metrics {

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Integers as integers (counts read naturally); the rest in the shortest exact form.
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  return fmt::format("{}", value);
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

bool NameChar(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

bool ValidName(std::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

constexpr Named<Kind> kKindNames[] = {
    {Kind::kCounter, "counter"}, {Kind::kGauge, "gauge"}, {Kind::kHistogram, "histogram"}};
static_assert(NamesAreUnique(kKindNames));

const char* KindName(Kind kind) { return NameIn(kKindNames, kind, "untyped"); }

// `{a="x",b="y"` without the closing brace (a histogram bucket appends its le), or "" with
// no labels and no extra.
void AppendLabels(std::string* out, const std::vector<std::string>& names,
                  const LabelValues& values, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return;
  *out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) *out += ',';
    *out += names[i];
    *out += "=\"";
    *out += EscapeLabelValue(values[i]);
    *out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) *out += ',';
    *out += extra_name;
    *out += "=\"";
    *out += extra_value;
    *out += '"';
  }
  *out += '}';
}

}  // namespace

bool ValidMetricName(std::string_view name) { return ValidName(name, true); }

bool ValidLabelName(std::string_view name) {
  return ValidName(name, false) && !name.starts_with("__");
}

Status Registry::Declare(std::string_view name, Kind kind, std::string_view help,
                         std::vector<std::string> label_names, std::vector<double> bounds) {
  if (!ValidMetricName(name)) {
    return Status::InvalidArgument(fmt::format("metric name '{}' is not [a-zA-Z_:][a-zA-Z0-9_:]*", name));
  }
  for (const auto& label : label_names) {
    if (!ValidLabelName(label) || (kind == Kind::kHistogram && label == "le")) {
      return Status::InvalidArgument(fmt::format("metric {}: bad label name '{}'", name, label));
    }
  }
  if (kind == Kind::kHistogram) {
    if (bounds.empty()) return Status::InvalidArgument(fmt::format("histogram {} has no buckets", name));
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
        return Status::InvalidArgument(
            fmt::format("histogram {}: bucket bounds must be finite and ascending", name));
      }
    }
  } else if (!bounds.empty()) {
    return Status::InvalidArgument(fmt::format("metric {}: only a histogram has buckets", name));
  }
  MutexLock lock(&mu_);
  if (const Family* existing = FindLocked(name)) {
    if (existing->kind == kind && existing->label_names == label_names && existing->bounds == bounds) {
      return Status::Ok();
    }
    return Status::InvalidArgument(fmt::format("metric {} declared twice, differently", name));
  }
  families_.push_back(Family{std::string(name), kind, std::string(help), std::move(label_names),
                             std::move(bounds), {}});
  return Status::Ok();
}

Registry::Family* Registry::FindLocked(std::string_view name) {
  for (auto& family : families_) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

const Registry::Family* Registry::FindLocked(std::string_view name) const {
  for (const auto& family : families_) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

Status Registry::SeriesLocked(std::string_view name, const LabelValues& labels, Kind want_a,
                              Kind want_b, Series** out, Family** family_out) {
  Family* family = FindLocked(name);
  if (family == nullptr) return Status::InvalidArgument(fmt::format("metric {} is not declared", name));
  if (family->kind != want_a && family->kind != want_b) {
    return Status::InvalidArgument(fmt::format("metric {} is a {}", name, KindName(family->kind)));
  }
  if (labels.size() != family->label_names.size()) {
    return Status::InvalidArgument(fmt::format("metric {} takes {} label values, not {}", name,
                                               family->label_names.size(), labels.size()));
  }
  Series& series = family->series[labels];
  if (family->kind == Kind::kHistogram && series.buckets.empty()) {
    series.buckets.assign(family->bounds.size(), 0);
  }
  *out = &series;
  *family_out = family;
  return Status::Ok();
}

// Set and Add write a counter's or a gauge's value; a counter never goes down, so neither takes
// a negative (or NaN) `value` for one. `what` says which in the error ("set to", "cannot add").
Status Registry::ValueSeriesLocked(std::string_view name, const LabelValues& labels, double value,
                                   std::string_view what, Series** out, Family** family) {
  Family* found = FindLocked(name);
  if (found != nullptr && found->kind == Kind::kCounter && !(value >= 0)) {
    return Status::InvalidArgument(fmt::format("counter {} {} {}", name, what, value));
  }
  return SeriesLocked(name, labels, Kind::kCounter, Kind::kGauge, out, family);
}

Status Registry::Set(std::string_view name, const LabelValues& labels, double value) {
  MutexLock lock(&mu_);
  Series* series = nullptr;
  Family* family = nullptr;
  FT_RETURN_IF_ERROR(ValueSeriesLocked(name, labels, value, "set to", &series, &family));
  series->value = family->kind == Kind::kCounter ? std::max(series->value, value) : value;
  return Status::Ok();
}

Status Registry::Add(std::string_view name, const LabelValues& labels, double delta) {
  MutexLock lock(&mu_);
  Series* series = nullptr;
  Family* family = nullptr;
  FT_RETURN_IF_ERROR(ValueSeriesLocked(name, labels, delta, "cannot add", &series, &family));
  series->value += delta;
  return Status::Ok();
}

Status Registry::Observe(std::string_view name, const LabelValues& labels, double value) {
  MutexLock lock(&mu_);
  Series* series = nullptr;
  Family* family = nullptr;
  FT_RETURN_IF_ERROR(SeriesLocked(name, labels, Kind::kHistogram, Kind::kHistogram, &series, &family));
  for (size_t i = 0; i < family->bounds.size(); ++i) {
    if (value <= family->bounds[i]) {
      ++series->buckets[i];
      break;
    }
  }
  ++series->count;
  series->sum += value;
  return Status::Ok();
}

void Registry::Remove(std::string_view name, const LabelValues& labels) {
  MutexLock lock(&mu_);
  if (Family* family = FindLocked(name)) family->series.erase(labels);
}

void Registry::Clear(std::string_view name) {
  MutexLock lock(&mu_);
  if (Family* family = FindLocked(name)) family->series.clear();
}

double Registry::Value(std::string_view name, const LabelValues& labels) const {
  MutexLock lock(&mu_);
  const Family* family = FindLocked(name);
  if (family == nullptr) return std::numeric_limits<double>::quiet_NaN();
  auto it = family->series.find(labels);
  if (it == family->series.end()) return std::numeric_limits<double>::quiet_NaN();
  return family->kind == Kind::kHistogram ? static_cast<double>(it->second.count) : it->second.value;
}

std::string Registry::Render() const {
  std::string out;
  MutexLock lock(&mu_);
  for (const Family& family : families_) {
    out += "# HELP ";
    out += family.name;
    out += ' ';
    out += EscapeHelp(family.help);
    out += "\n# TYPE ";
    out += family.name;
    out += ' ';
    out += KindName(family.kind);
    out += '\n';
    for (const auto& [labels, series] : family.series) {
      if (family.kind != Kind::kHistogram) {
        out += family.name;
        AppendLabels(&out, family.label_names, labels);
        out += ' ';
        out += FormatValue(series.value);
        out += '\n';
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= family.bounds.size(); ++i) {
        const bool inf = i == family.bounds.size();
        cumulative = inf ? series.count : cumulative + series.buckets[i];
        out += family.name;
        out += "_bucket";
        AppendLabels(&out, family.label_names, labels, "le",
                     inf ? "+Inf" : FormatValue(family.bounds[i]));
        out += ' ';
        out += FormatValue(static_cast<double>(cumulative));
        out += '\n';
      }
      out += family.name;
      out += "_sum";
      AppendLabels(&out, family.label_names, labels);
      out += ' ';
      out += FormatValue(series.sum);
      out += '\n';
      out += family.name;
      out += "_count";
      AppendLabels(&out, family.label_names, labels);
      out += ' ';
      out += FormatValue(static_cast<double>(series.count));
      out += '\n';
    }
  }
  return out;
}

}  // namespace ft::metrics

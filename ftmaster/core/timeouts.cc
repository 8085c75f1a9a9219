#include "ftmaster/core/timeouts.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace ft::master {
namespace {

double ToMs(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

bool Differs(double a, double b, double ratio) {
  const double base = std::max(std::min(a, b), 1e-9);
  return std::fabs(a - b) > ratio * base;
}

}  // namespace

TimeoutOptions TimeoutOptions::FromConfig(const Config& config) {
  TimeoutOptions o;
  o.floor_ms = ToMs(config.timeout_floor);
  o.ceiling_ms = std::max(o.floor_ms, ToMs(config.timeout_ceiling));
  o.warmup_ms = ToMs(config.timeout_warmup);
  o.multiplier = static_cast<double>(std::max<int64_t>(1, config.timeout_multiplier));
  o.min_samples = static_cast<uint64_t>(std::max<int64_t>(0, config.timeout_min_samples));
  return o;
}

void TimeoutModel::Window::Put(int64_t bucket_number, double value) {
  auto slot = static_cast<size_t>(bucket_number % kWindowBuckets);
  if (bucket[slot] != bucket_number) {
    if (bucket[slot] > bucket_number) return;  // older than what the slot holds: out of window
    bucket[slot] = bucket_number;
    max[slot] = value;
  } else {
    max[slot] = std::max(max[slot], value);
  }
}

double TimeoutModel::Window::Max(int64_t newest_bucket) const {
  double m = 0;
  for (int i = 0; i < kWindowBuckets; ++i) {
    if (bucket[static_cast<size_t>(i)] > 0 && bucket[static_cast<size_t>(i)] > newest_bucket - kWindowBuckets) {
      m = std::max(m, max[static_cast<size_t>(i)]);
    }
  }
  return m;
}

TimeoutModel::TimeoutModel(TimeoutOptions options) : options_(options) {
  options_.window_ms = std::max<int64_t>(options_.window_ms, kWindowBuckets);
  options_.ceiling_ms = std::max(options_.ceiling_ms, options_.floor_ms);
}

double TimeoutModel::Clamp(double ms) const {
  return std::clamp(ms, options_.floor_ms, options_.ceiling_ms);
}

void TimeoutModel::Restore(const proto::TimeoutTable& published) {
  published_ = published;
}

void TimeoutModel::Add(const proto::RankSummary& s) {
  auto [it, inserted] = last_summary_ms_.emplace(s.rank, s.unix_ms);
  if (!inserted) {
    if (s.unix_ms <= it->second) return;
    it->second = s.unix_ms;
  }
  const int64_t bucket = std::max<int64_t>(s.unix_ms, 0) / (options_.window_ms / kWindowBuckets) + 1;
  newest_bucket_ = std::max(newest_bucket_, bucket);
  const double step = std::max(s.step_ms, s.step_p50_ms);
  if (step > 0 && std::isfinite(step)) step_.Put(bucket, step);
  for (const proto::OpSummary& op : s.ops) {
    if (op.count == 0) continue;
    KeyState& k = keys_[Key{op.comm_id, op.op, op.bucket}];
    const double tail = std::max(op.p99_ms, op.max_ms);
    if (tail > 0 && std::isfinite(tail)) k.tail.Put(bucket, tail);
    uint64_t& n = k.count_by_rank[s.rank];
    n += op.count;
    k.samples = std::max(k.samples, n);
  }
}

bool TimeoutModel::Update(int64_t now_unix_ms) {
  const double step = step_.Max(newest_bucket_);
  proto::TimeoutTable next;
  next.default_ms = Clamp(step > 0 ? options_.multiplier * step : options_.warmup_ms);
  std::map<Key, double> next_ms;
  for (const auto& [key, k] : keys_) {
    if (k.samples < options_.min_samples) continue;
    const double tail = k.tail.Max(newest_bucket_);
    if (tail <= 0) continue;  // nothing recent: workers use the default
    const double ms = Clamp(options_.multiplier * tail);
    if (ms == next.default_ms) continue;
    next_ms[key] = ms;
  }

  bool changed = published_.version == 0 ||
                 Differs(next.default_ms, published_.default_ms, options_.change_ratio);
  if (!changed) {
    std::map<Key, double> old_ms;
    for (const proto::TimeoutEntry& e : published_.entries) {
      old_ms[Key{e.comm_id, e.op, e.bucket}] = e.ms;
    }
    auto effective = [](const std::map<Key, double>& m, const Key& key, double fallback) {
      auto it = m.find(key);
      return it == m.end() ? fallback : it->second;
    };
    for (const auto& [key, ms] : next_ms) {
      if (Differs(ms, effective(old_ms, key, published_.default_ms), options_.change_ratio)) {
        changed = true;
        break;
      }
    }
    for (auto it = old_ms.begin(); !changed && it != old_ms.end(); ++it) {
      if (Differs(it->second, effective(next_ms, it->first, next.default_ms), options_.change_ratio)) {
        changed = true;
      }
    }
  }
  if (!changed) return false;

  next.version = published_.version + 1;
  next.unix_ms = now_unix_ms;
  next.entries.reserve(next_ms.size());
  for (const auto& [key, ms] : next_ms) {
    next.entries.push_back(proto::TimeoutEntry{std::get<0>(key), std::get<1>(key), std::get<2>(key), ms});
  }
  published_ = std::move(next);
  return true;
}

}  // namespace ft::master

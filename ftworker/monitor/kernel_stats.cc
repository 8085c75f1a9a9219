#include "ftworker/monitor/kernel_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "shm/records.h"

namespace ft::worker {

using shm::RecordType;

bool KernelStats::OnRecord(const shm::Record& r) {
  switch (static_cast<RecordType>(r.type)) {
    case RecordType::kKernelName: {
      if (names_.size() >= kMaxKernels && names_.count(r.a) == 0) return true;
      char head[17] = {};
      std::memcpy(head, &r.c, 8);
      std::memcpy(head + 8, &r.d, 8);
      std::string name(head, strnlen(head, 16));
      // Foreign bytes: keep what a person can read.
      for (char& ch : name) {
        if (ch < 0x21 || ch > 0x7e) ch = '?';
      }
      if (!name.empty()) names_[r.a] = std::move(name);
      return true;
    }
    case RecordType::kKernelHandle:
      if (handles_.size() < kMaxKernels || handles_.count(r.a) > 0) handles_[r.a] = r.b;
      return true;
    case RecordType::kKernelCount:
      window_launches_ += r.c;
      return true;
    case RecordType::kKernelSample: {
      std::string name = NameOf(r.a);
      auto it = window_.find(name);
      if (it == window_.end()) {
        if (window_.size() >= kMaxWindowKernels) return true;
        it = window_.emplace(std::move(name), Window{}).first;
      }
      Window& w = it->second;
      double ms = static_cast<double>(r.b) / 1e6;
      ++w.count;
      w.max_ms = std::max(w.max_ms, ms);
      if (w.ms.size() < kMaxSamples) w.ms.push_back(ms);
      return true;
    }
    default:
      return false;
  }
}

std::string KernelStats::NameOf(uint64_t kernel) const {
  auto handle = handles_.find(kernel);
  uint64_t stub = handle != handles_.end() ? handle->second : kernel;
  auto name = names_.find(stub);
  return name != names_.end() ? name->second : fmt::format("0x{:x}", stub);
}

uint64_t KernelStats::TakeLaunches() {
  uint64_t n = window_launches_;
  window_launches_ = 0;
  return n;
}

std::vector<proto::KernelSummary> KernelStats::TakeSamples() {
  std::vector<proto::KernelSummary> out;
  out.reserve(window_.size());
  for (auto& [name, w] : window_) {
    std::sort(w.ms.begin(), w.ms.end());
    out.push_back(proto::KernelSummary{name, w.count, w.ms[w.ms.size() / 2], w.max_ms});
  }
  window_.clear();
  return out;
}

}  // namespace ft::worker

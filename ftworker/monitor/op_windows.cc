#include "ftworker/monitor/op_windows.h"

#include <algorithm>
#include <cmath>

#include "common/hash.h"
#include "shm/records.h"

namespace ft::worker {
namespace {

constexpr size_t kMaxComms = 4096;  // foreign bytes must not grow us unbounded
constexpr size_t kMaxOpKeys = 4096;
constexpr size_t kMaxPendingOps = 1 << 15;
constexpr size_t kMaxSamples = 4096;  // per (comm, op, bucket) and window

uint64_t PendingKey(const shm::Record& r) { return Mix64(r.comm_id ^ Mix64(r.a ^ Mix64(r.seq))); }

double Percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

void OpWindows::OnEnter(const shm::Record& r, uint32_t op) {
  if (pending_bytes_.size() >= kMaxPendingOps) pending_bytes_.clear();  // ends were lost
  pending_bytes_[PendingKey(r)] = r.b;
  if (!(r.flags & shm::kFlagP2P) && r.comm_id != 0 && (recent_.size() < kMaxComms || recent_.count(r.comm_id) > 0)) {
    recent_[r.comm_id][r.seq % 64] = Recent{r.seq, Entered{op, r.b}};
  }
}

bool OpWindows::OnEnd(const shm::Record& r, uint32_t op) {
  auto pending = pending_bytes_.find(PendingKey(r));
  if (pending == pending_bytes_.end()) return false;  // its enter was lost or came before we attached
  const uint64_t bytes = pending->second;
  pending_bytes_.erase(pending);
  if (r.flags & (shm::kFlagError | shm::kFlagUntimed | shm::kFlagCaptured)) return false;
  Key key{r.comm_id, op, proto::SizeBucket(bytes)};
  auto it = windows_.find(key);
  if (it == windows_.end()) {
    if (windows_.size() >= kMaxOpKeys) return true;
    it = windows_.emplace(key, Window{}).first;
  }
  Window& w = it->second;
  double ms = static_cast<double>(r.b) / 1e6;
  ++w.count;
  w.max_ms = std::max(w.max_ms, ms);
  w.sum_ms += ms;
  w.last_seq = std::max(w.last_seq, r.seq);
  if (w.samples_ms.size() < kMaxSamples) {
    w.samples_ms.push_back(ms);
  } else {
    sample_rng_ = sample_rng_ * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t j = (sample_rng_ >> 17) % w.count;
    if (j < kMaxSamples) w.samples_ms[j] = ms;
  }
  return true;
}

std::optional<OpWindows::Entered> OpWindows::EnteredOp(uint64_t comm_id, uint64_t seq) const {
  auto it = recent_.find(comm_id);
  if (it == recent_.end() || it->second[seq % 64].seq != seq) return std::nullopt;
  return it->second[seq % 64].op;
}

std::vector<proto::OpSummary> OpWindows::TakeSummaries() {
  std::vector<proto::OpSummary> out;
  for (auto& [key, w] : windows_) {
    proto::OpSummary o;
    o.comm_id = key.comm_id;
    o.op = shm::OpKindOfRecord(key.op);
    o.bucket = key.bucket;
    o.count = w.count;
    std::sort(w.samples_ms.begin(), w.samples_ms.end());
    o.p10_ms = Percentile(w.samples_ms, 0.10);
    o.p50_ms = Percentile(w.samples_ms, 0.50);
    o.p99_ms = Percentile(w.samples_ms, 0.99);
    o.max_ms = w.max_ms;
    o.last_seq = w.last_seq;
    o.sum_ms = w.sum_ms;
    out.push_back(std::move(o));
  }
  windows_.clear();
  return out;
}

}  // namespace ft::worker

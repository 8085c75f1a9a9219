#include "ftworker/monitor/timeout_detector.h"

#include <algorithm>

#include <fmt/format.h>

#include "ftworker/monitor/op_names.h"

namespace ft::worker {

void TimeoutPolicy::Set(const proto::TimeoutTable& table) {
  version_ = table.version;
  default_ms_ = table.default_ms;
  entries_.clear();
  for (const proto::TimeoutEntry& e : table.entries) {
    if (e.ms > 0) entries_[{e.comm_id, e.op, e.bucket}] = e.ms;
  }
}

double TimeoutPolicy::TimeoutMs(uint64_t comm_id, proto::OpKind op, int bucket) const {
  auto it = entries_.find({comm_id, op, bucket});
  if (it != entries_.end()) return it->second;
  if (version_ > 0 && default_ms_ > 0) return default_ms_;
  return warmup_ms_;
}

double TimeoutPolicy::TimeoutMs(uint64_t comm_id, proto::OpKind op, int bucket, uint64_t seq) const {
  const double ms = TimeoutMs(comm_id, op, bucket);
  return seq <= 1 ? std::max(ms, first_op_ms_) : ms;
}

void TimeoutDetector::Check(const std::vector<InFlightOp>& ops, const TimeoutPolicy& policy,
                            const proto::RankProgress& progress, int64_t unix_ms,
                            std::vector<proto::Event>* out) {
  active_.clear();
  for (const InFlightOp& op : ops) {
    Key key{op.comm_id, op.p2p};
    auto it = raised_.find(key);
    bool already = it != raised_.end() && it->second >= op.seq;
    if (already) {
      active_.push_back(ActiveTimeout{op.comm_id, op.p2p, op.seq, op.op});
      continue;
    }
    double timeout_ms = policy.TimeoutMs(op.comm_id, op.op, proto::SizeBucket(op.bytes), op.seq);
    if (op.started_age_ms <= timeout_ms) continue;
    raised_[key] = op.seq;
    active_.push_back(ActiveTimeout{op.comm_id, op.p2p, op.seq, op.op});
    proto::Event e = proto::NewEvent(proto::EventKind::kTimeout, progress.rank, progress.node, unix_ms);
    e.comm_id = op.comm_id;
    e.op = op.op;
    e.seq = op.seq;
    e.age_ms = op.started_age_ms;
    e.timeout_ms = timeout_ms;
    e.started = true;
    e.message = fmt::format(
        "rank {} has been in {} {}#{} on comm {} for {:.1f} s (timeout {:.1f} s): its GPU "
        "reached the op and waits on peers; the master names the rank(s) that have not "
        "reached it from the progress tables",
        progress.rank, proto::OpKindName(op.op), op.p2p ? "(p2p) " : "", op.seq, CommHex(op.comm_id),
        op.started_age_ms / 1000, timeout_ms / 1000);
    e.progress = progress;
    out->push_back(std::move(e));
  }
}

}  // namespace ft::worker

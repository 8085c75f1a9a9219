// master_bench: how the synthetic job's values are encoded and what numbers they carry while
// the job runs and once it hangs; see synthetic_job.h.
#include "bench/master_bench/synthetic_job.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "common/hash.h"
#include "proto/codec.h"

namespace ft::bench {
namespace {

// Per-rank jitter from a deterministic hash: the same job every run.
double Jitter(uint64_t key, double spread) {  // in [-spread, +spread]
  return (static_cast<double>(SplitMix64(key) % 10001) / 10000.0 * 2 - 1) * spread;
}

}  // namespace

// The changing numbers of a progress table, in the order of its template's holes: integers
// first (observed_unix_ms, then per row entered, started, completed), then numbers
// (last_call_age_ms, blocked_ms, then per row entered/started/completed ages).
struct ProgressDyn {
  int64_t observed = 0;
  double last_call_age = 0, blocked = 0;
  struct Row {
    uint64_t e = 0, s = 0, c = 0;
    double ea = 0, sa = 0, ca = 0;
  };
  std::vector<Row> rows;

  void Values(std::vector<double>* v) const {
    v->clear();
    v->push_back(static_cast<double>(observed));
    for (const Row& r : rows) {
      v->push_back(static_cast<double>(r.e));
      v->push_back(static_cast<double>(r.s));
      v->push_back(static_cast<double>(r.c));
    }
    v->push_back(last_call_age);
    v->push_back(blocked);
    for (const Row& r : rows) {
      v->push_back(r.ea);
      v->push_back(r.sa);
      v->push_back(r.ca);
    }
  }
  static ProgressDyn Sentinels(size_t rows) {
    ProgressDyn d;
    int i = 0, n = 0;
    d.observed = static_cast<int64_t>(IntSentinel(i++));
    d.rows.resize(rows);
    for (Row& r : d.rows) {
      r.e = static_cast<uint64_t>(IntSentinel(i++));
      r.s = static_cast<uint64_t>(IntSentinel(i++));
      r.c = static_cast<uint64_t>(IntSentinel(i++));
    }
    d.last_call_age = NumSentinel(n++);
    d.blocked = NumSentinel(n++);
    for (Row& r : d.rows) {
      r.ea = NumSentinel(n++);
      r.sa = NumSentinel(n++);
      r.ca = NumSentinel(n++);
    }
    return d;
  }
};

struct SummaryDyn {
  int64_t unix_ms = 0;
  uint64_t steps = 0, records = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ops;  // count, last_seq

  void Values(std::vector<double>* v) const {
    v->clear();
    v->push_back(static_cast<double>(unix_ms));
    v->push_back(static_cast<double>(steps));
    v->push_back(static_cast<double>(records));
    for (const auto& [count, seq] : ops) {
      v->push_back(static_cast<double>(count));
      v->push_back(static_cast<double>(seq));
    }
  }
};

Status SyntheticJob::Build() {
  const int n = layout_.world();
  roles_.resize(static_cast<size_t>(n));
  membership_.resize(static_cast<size_t>(n));
  running_.resize(static_cast<size_t>(n));
  hung_.resize(static_cast<size_t>(n));
  summary_.resize(static_cast<size_t>(n));
  summary_ops_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    roles_[static_cast<size_t>(r)] = RoleOf(r);
    proto::Membership m;
    m.rank = r;
    m.local_rank = r % kTp;
    m.world_size = n;
    m.node = layout_.Node(r);
    m.host = m.node;
    m.pid = Pid(r);
    m.incarnation = Incarnation();
    m.state = "running";
    m.unix_ms = start_ms_;
    for (const proto::CommRow& row : Rows(r, false)) {
      m.comms.push_back({row.comm_id, row.p2p, row.comm_rank, row.comm_size});
    }
    membership_[static_cast<size_t>(r)] = proto::Encode(m);
    const size_t rows = m.comms.size();
    const ProgressDyn sentinels = ProgressDyn::Sentinels(rows);
    const auto holes = Holes(1 + 3 * static_cast<int>(rows), 2 + 3 * static_cast<int>(rows));
    FT_RETURN_IF_ERROR(Template::Make(proto::Encode(Progress(r, false, sentinels)), holes,
                                      &running_[static_cast<size_t>(r)]));
    FT_RETURN_IF_ERROR(Template::Make(proto::Encode(Progress(r, true, sentinels)), holes,
                                      &hung_[static_cast<size_t>(r)]));
    FT_RETURN_IF_ERROR(BuildSummary(r));
  }
  // Every kind of rendered value must read back (a sentinel mistake would otherwise only
  // show as values the master skips).
  for (int r : {0, hang_.stopped, n - 1}) {
    for (bool hung : {false, true}) {
      std::string text;
      RenderProgress(r, hung, start_ms_ + 5000, &text);
      proto::RankProgress p;
      FT_RETURN_IF_ERROR(proto::Decode(text, &p).WithContext(fmt::format("rank {} progress", r)));
    }
    std::string text;
    RenderSummary(r, start_ms_ + 5000, false, &text);
    proto::RankSummary s;
    FT_RETURN_IF_ERROR(proto::Decode(text, &s).WithContext(fmt::format("rank {} summary", r)));
  }
  return Status::Ok();
}

void SyntheticJob::MembershipCommands(std::vector<redis::Argv>* out) const {
  for (int node = 0; node < layout_.nodes(); ++node) {
    redis::Argv argv = {"HSET", keys_.Ranks()};
    for (int r = node * kTp; r < (node + 1) * kTp; ++r) {
      argv.push_back(std::to_string(r));
      argv.push_back(membership_[static_cast<size_t>(r)]);
    }
    out->push_back(std::move(argv));
    out->push_back({"INCR", keys_.RanksVersion()});  // as ftworker's reporter, with each write
  }
}

void SyntheticJob::ProgressCommand(int node, int64_t now, bool hung,
                                   std::vector<redis::Argv>* out) {
  // One HSET per rank: the ranks of a node fall in different groups (proto/keys.h).
  for (int r = node * kTp; r < (node + 1) * kTp; ++r) {
    redis::Argv argv = {"HSET", keys_.ProgressOf(r), std::to_string(r), ""};
    RenderProgress(r, hung, now, &argv.back());
    out->push_back(std::move(argv));
  }
}

void SyntheticJob::RankProgressCommand(int r, int64_t now, bool hung,
                                       std::vector<redis::Argv>* out) {
  redis::Argv argv = {"HSET", keys_.ProgressOf(r), std::to_string(r), ""};
  RenderProgress(r, hung, now, &argv.back());
  out->push_back(std::move(argv));
}

void SyntheticJob::SummaryCommand(int node, int64_t now, bool hung,
                                  std::vector<redis::Argv>* out) {
  for (int r = node * kTp; r < (node + 1) * kTp; ++r) {
    redis::Argv argv = {"HSET", keys_.SummaryOf(r), std::to_string(r), ""};
    RenderSummary(r, now, hung, &argv.back());
    out->push_back(std::move(argv));
  }
}

void SyntheticJob::HeartbeatCommands(int node, int64_t now, std::vector<redis::Argv>* out) const {
  proto::WorkerHeartbeat beat;
  beat.node = layout_.Node(node * kTp);
  beat.host = beat.node;
  beat.pid = 300000 + node;
  for (int r = node * kTp; r < (node + 1) * kTp; ++r) beat.ranks.push_back(r);
  beat.unix_ms = now;
  out->push_back({"SET", keys_.WorkerHeartbeat(beat.node), proto::Encode(beat), "EX", "5"});
  out->push_back({"SADD", keys_.Workers(), beat.node});
}

int64_t SyntheticJob::WaitStart(int r) const {
  switch (role(r)) {
    case Role::kStopped:
    case Role::kTpPeer: return hang_.t0;
    case Role::kChain: return hang_.t0 + 5 * std::abs(layout_.S(r) - hang_.xp);
    case Role::kDpWaiter: return hang_.t0 + 20 + static_cast<int64_t>(SplitMix64(r) % 80);
  }
  return hang_.t0;
}

std::vector<SyntheticJob::PendingEvent> SyntheticJob::Events(bool all) {
  std::vector<PendingEvent> out;
  for (int r = 0; r < layout_.world(); ++r) {
    const Role ro = role(r);
    if (ro == Role::kStopped || (!all && ro != Role::kTpPeer)) continue;
    // A worker notices within its tick; nodes differ in phase.
    const int64_t due = WaitStart(r) + static_cast<int64_t>(hang_.timeout_ms) + 1 +
                        static_cast<int64_t>(SplitMix64(0x5eed + r / kTp) % kDriverTickMs);
    proto::Event e;
    e.kind = "timeout";
    e.rank = r;
    e.node = layout_.Node(r);
    e.unix_ms = due;
    e.started = true;
    e.timeout_ms = hang_.timeout_ms;
    e.age_ms = static_cast<double>(due - WaitStart(r));
    e.progress = Progress(r, true, HungDyn(r, due));
    for (const proto::CommRow& row : e.progress.comms) {
      if (row.started_seq > row.completed_seq) {
        e.comm_id = row.comm_id;
        e.op = row.op;
        e.seq = row.completed_seq + 1;
      }
    }
    e.message = fmt::format("rank {} waits in {} #{} on comm {} for {:.0f} ms (timeout {:.0f} "
                            "ms): a peer has not joined; see ftmaster's incident",
                            r, proto::OpKindName(e.op), e.seq, proto::CommIdHex(e.comm_id), e.age_ms,
                            e.timeout_ms);
    PendingEvent p;
    p.due = due;
    p.rank = r;
    p.xadd = {"XADD", keys_.Events(), "MAXLEN", "~", kEventsCap, "*", "kind", "timeout",
              "rank", std::to_string(r), "node", e.node, "json", proto::Encode(e)};
    p.hset = {"HSET", keys_.ProgressOf(r), std::to_string(r), proto::Encode(e.progress)};
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(),
            [](const PendingEvent& a, const PendingEvent& b) { return a.due < b.due; });
  return out;
}

Role SyntheticJob::RoleOf(int r) const {
  if (r == hang_.stopped) return Role::kStopped;
  const int d = layout_.D(r), s = layout_.S(r);
  if (d == hang_.xd && s == hang_.xp) return Role::kTpPeer;
  if (d == hang_.xd) return Role::kChain;
  return Role::kDpWaiter;
}

std::vector<proto::CommRow> SyntheticJob::Rows(int r, bool hung) const {
  const int t = layout_.T(r), d = layout_.D(r), s = layout_.S(r);
  std::vector<proto::CommRow> rows;
  auto add = [&](uint64_t comm, bool p2p, int comm_rank, int size, proto::OpKind op,
                 uint64_t bytes, int64_t peer) {
    proto::CommRow row;
    row.comm_id = comm;
    row.p2p = p2p;
    row.comm_rank = comm_rank;
    row.comm_size = size;
    row.op = op;
    row.bytes = bytes;
    row.peer = peer;
    rows.push_back(row);
  };
  if (layout_.tp > 1) add(layout_.TpComm(d, s), false, t, layout_.tp, proto::OpKind::kAllReduce, 4 << 20, -1);
  if (layout_.dp > 1) add(layout_.DpComm(t, s), false, d, layout_.dp, proto::OpKind::kAllReduce, 64 << 20, -1);
  if (layout_.pp > 1) {
    // Running: the last p2p op of the step; hung, a chain rank's pending one points toward
    // the stopped stage.
    const bool toward_next = hung && role(r) == Role::kChain ? s < hang_.xp : s + 1 < layout_.pp;
    add(layout_.PpComm(t, d), true, s, layout_.pp, toward_next ? proto::OpKind::kSend : proto::OpKind::kRecv, 8 << 20,
        toward_next ? s + 1 : s - 1);
  }
  return rows;
}

proto::RankProgress SyntheticJob::Progress(int r, bool hung, const ProgressDyn& dyn) const {
  proto::RankProgress p;
  p.rank = r;
  p.node = layout_.Node(r);
  p.pid = Pid(r);
  p.incarnation = Incarnation();
  p.state = "running";
  p.observed_unix_ms = dyn.observed;
  p.last_call_age_ms = dyn.last_call_age;
  p.blocked_ms = dyn.blocked;
  // Running ranks launch work all the time (busy); hung, the stopped rank idles on the host
  // and the waiting ones spin inside a synchronizing call (blocked, so not busy).
  p.cpu_pct = !hung ? 95 : role(r) == Role::kStopped ? 2 : 100;
  p.busy = !hung;
  p.comms = Rows(r, hung);
  for (size_t i = 0; i < p.comms.size() && i < dyn.rows.size(); ++i) {
    proto::CommRow& row = p.comms[i];
    row.entered_seq = dyn.rows[i].e;
    row.started_seq = dyn.rows[i].s;
    row.completed_seq = dyn.rows[i].c;
    row.entered_age_ms = dyn.rows[i].ea;
    row.started_age_ms = dyn.rows[i].sa;
    row.completed_age_ms = dyn.rows[i].ca;
  }
  return p;
}

uint64_t SyntheticJob::PerStep(const proto::CommRow& row) {
  return row.p2p ? 2 : Layout::IsTp(row) ? kTpOpsPerStep : 1;
}

ProgressDyn SyntheticJob::RunningDyn(int r, int64_t now) const {
  ProgressDyn d;
  const int64_t since = std::max<int64_t>(now - start_ms_, 0);
  const uint64_t k = static_cast<uint64_t>(since / kStepMs);
  const double phase = static_cast<double>(since % kStepMs);
  d.observed = now;
  d.last_call_age = 0.2;
  d.blocked = 0;
  for (const proto::CommRow& row : Rows(r, false)) {
    const uint64_t seq = k * PerStep(row);
    d.rows.push_back({seq, seq, seq, phase + 3, phase + 2, phase});
  }
  return d;
}

ProgressDyn SyntheticJob::HungDyn(int r, int64_t now) const {
  ProgressDyn d;
  const Role ro = role(r);
  const uint64_t k0 = hang_.k0;
  const double h = static_cast<double>(std::max<int64_t>(now - hang_.t0, 0));
  const double w = static_cast<double>(std::max<int64_t>(now - WaitStart(r), 0));
  d.observed = now;
  d.last_call_age = ro == Role::kStopped ? h : w;
  d.blocked = ro == Role::kStopped ? 0 : w;
  for (const proto::CommRow& row : Rows(r, true)) {
    const bool tp = Layout::IsTp(row);
    const bool dp = Layout::IsDp(row);
    uint64_t done = k0 * PerStep(row);
    bool waiting = false;
    if (ro == Role::kTpPeer && tp) waiting = true;
    if (ro == Role::kChain && row.p2p) waiting = true;
    if (ro == Role::kDpWaiter) {
      // Finished step k0 + 1 except its dp allreduce, in which it waits.
      if (dp) {
        waiting = true;
      } else {
        done = (k0 + 1) * PerStep(row);
      }
    }
    if (waiting) {
      d.rows.push_back({done + 1, done + 1, done, w, w, w + 10});
    } else {
      d.rows.push_back({done, done, done, w + 20, w + 19, w + 15});
    }
  }
  return d;
}

void SyntheticJob::RenderProgress(int r, bool hung, int64_t now, std::string* out) {
  const ProgressDyn dyn = hung ? HungDyn(r, now) : RunningDyn(r, now);
  dyn.Values(&scratch_);
  (hung ? hung_ : running_)[static_cast<size_t>(r)].Render(scratch_, out);
}

Status SyntheticJob::BuildSummary(int r) {
  proto::RankSummary s;
  s.rank = r;
  s.node = layout_.Node(r);
  // Healthy jitter (±3%): far from the straggler detector's 20%.
  s.step_ms = kStepMs * (1 + Jitter(r * 7 + 1, 0.03));
  s.step_p50_ms = kStepMs * (1 + Jitter(r * 7 + 2, 0.03));
  s.compute_ms = 70 * (1 + Jitter(r * 7 + 3, 0.03));
  s.comm_wait_ms = 30 * (1 + Jitter(r * 7 + 4, 0.03));
  s.dropped = 0;
  int ints = 0;
  s.unix_ms = static_cast<int64_t>(IntSentinel(ints++));
  s.steps = static_cast<uint64_t>(IntSentinel(ints++));
  s.records = static_cast<uint64_t>(IntSentinel(ints++));
  for (const proto::CommRow& row : Rows(r, false)) {
    std::vector<proto::OpKind> ops = {row.p2p ? proto::OpKind::kSend : proto::OpKind::kAllReduce};
    if (row.p2p) ops.push_back(proto::OpKind::kRecv);
    for (proto::OpKind op : ops) {
      proto::OpSummary o;
      o.comm_id = row.comm_id;
      o.op = op;
      o.bucket = proto::SizeBucket(row.bytes);
      const double base = row.p2p ? 1.5 : Layout::IsTp(row) ? 2.0 : 20.0;
      o.p50_ms = base * (1 + Jitter(r * 31 + ints, 0.03));
      o.p99_ms = o.p50_ms * 1.4;
      o.max_ms = o.p50_ms * 1.8;
      o.count = static_cast<uint64_t>(IntSentinel(ints++));
      o.last_seq = static_cast<uint64_t>(IntSentinel(ints++));
      s.ops.push_back(o);
      summary_ops_[static_cast<size_t>(r)].push_back(PerStep(row) / (row.p2p ? 2 : 1));
    }
  }
  return Template::Make(proto::Encode(s), Holes(ints, 0), &summary_[static_cast<size_t>(r)]);
}

void SyntheticJob::RenderSummary(int r, int64_t now, bool hung, std::string* out) {
  const int64_t until = hung ? hang_.t0 : now;
  const uint64_t k = static_cast<uint64_t>(std::max<int64_t>(until - start_ms_, 0) / kStepMs);
  SummaryDyn dyn;
  dyn.unix_ms = now;
  dyn.steps = k;
  uint64_t per_window = 0;
  for (uint64_t per_step : summary_ops_[static_cast<size_t>(r)]) {
    // In a hang nothing completes: the window's counts drop to 0.
    const uint64_t count = hung ? 0 : per_step * (kSummaryPeriodMs / kStepMs);
    dyn.ops.emplace_back(count, k * per_step);
    per_window += count;
  }
  dyn.records = per_window * 3;
  dyn.Values(&scratch_);
  summary_[static_cast<size_t>(r)].Render(scratch_, out);
}

}  // namespace ft::bench

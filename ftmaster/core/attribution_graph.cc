#include "ftmaster/core/attribution_graph.h"

#include <algorithm>
#include <limits>

namespace ft::master::attribution {
namespace {

constexpr int64_t kClockSlackMs = 1000;  // two workers' clocks are compared no finer than this

// A send matches a receive: two sends (or two receives) toward each other are no pair.
bool Complementary(proto::OpKind a, proto::OpKind b) {
  if (a == proto::OpKind::kSend) return b != proto::OpKind::kSend;
  if (a == proto::OpKind::kRecv) return b != proto::OpKind::kRecv;
  return true;  // unknown kinds: do not rule the match out
}

}  // namespace

double WaitedMs(const RankInfo& r, const proto::CommRow& row, int64_t now_unix_ms) {
  if (row.started_age_ms < 0) return std::numeric_limits<double>::infinity();
  return row.started_age_ms + static_cast<double>(now_unix_ms - r.progress->observed_unix_ms);
}

WaitForGraph::WaitForGraph(Snapshot& snap, const AttributionInput& in) : snap_(snap) {
  std::vector<RankInfo>& ranks = snap.ranks();
  FindMostCompleted();
  for (size_t a = 0; a < ranks.size(); ++a) {
    const RankInfo& r = ranks[a];
    if (r.progress == nullptr || r.dead) continue;
    for (const proto::CommRow& row : r.progress->comms) {
      if (row.started_seq > row.completed_seq) AddRow(static_cast<int>(a), row, in.now_unix_ms);
    }
  }
  for (size_t ti = 0; ti < targets_.size(); ++ti) {
    for (int b : targets_[ti].blockers) {
      ranks[static_cast<size_t>(b)].blocks.push_back(static_cast<int>(ti));
    }
  }
}

void WaitForGraph::AddRow(int a, const proto::CommRow& row, int64_t now_unix_ms) {
  RankInfo& r = snap_.ranks()[static_cast<size_t>(a)];
  const int ci = snap_.FindComm(row.comm_id);
  if (ci < 0) return;  // an invalid row (comm rank out of range): nothing to compare
  // A collective with a root: a member may finish its part before the others (a broadcast's
  // root once its data left, a reduce's non-roots once they forwarded theirs), so "completed
  // here, in flight there" is no evidence that the one in flight has stopped observing.
  const bool rooted = row.entered_seq == row.completed_seq + 1 && proto::HasRoot(row.op);
  if (!row.p2p && (r.frozen || !rooted) &&
      most_completed_[static_cast<size_t>(ci)].first >= row.completed_seq + 1) {
    // A live member completed the collective this row shows in flight: it is over on the GPUs,
    // and this rank has not seen it end. It waits on nobody; the members waiting in the next
    // collective wait on it.
    if (r.lag_comm < 0) {
      r.lag_comm = ci;
      r.lag_seq = row.completed_seq + 1;
      r.lag_peer = most_completed_[static_cast<size_t>(ci)].second;
    }
    return;
  }
  // A frozen rank waits on nothing: what its table shows in flight is where it stopped
  // looking, not what it waits for. It is a root if others wait on it.
  if (r.frozen) return;
  if (row.p2p && PeerExitedAfterTheExchange(r, ci, row)) return;
  r.waits = true;
  r.waited_ms = std::max(r.waited_ms, WaitedMs(r, row, now_unix_ms));
  if (row.p2p) {
    AddP2p(a, ci, row, now_unix_ms);
    return;
  }
  const uint64_t seq = row.completed_seq + 1;
  auto key = std::pair<int, uint64_t>(ci, seq);
  auto [it, inserted] = collective_.emplace(key, static_cast<int>(targets_.size()));
  if (inserted) NewCollective(ci, seq);
  Target& t = targets_[static_cast<size_t>(it->second)];
  t.waiters.push_back(a);
  if (t.op == proto::OpKind::kNone && row.entered_seq == seq) t.op = row.op;
  if (t.example_row == nullptr) {
    t.example_row = &row;
    t.example_waiter = a;
  }
  const double waited = WaitedMs(r, row, now_unix_ms);
  t.longest_wait_ms = std::max(t.longest_wait_ms, waited);
  t.met_ms = std::min(t.met_ms, waited);
}

void WaitForGraph::Reach(const std::vector<int>& sources, int* direct, int* total, std::vector<char>* mark) {
  std::vector<RankInfo>& ranks = snap_.ranks();
  ++epoch_;
  if (rank_seen_.size() < ranks.size()) rank_seen_.resize(ranks.size(), 0);
  if (target_seen_.size() < targets_.size()) target_seen_.resize(targets_.size(), 0);
  queue_.clear();
  for (int s : sources) {
    rank_seen_[static_cast<size_t>(s)] = epoch_;
    queue_.push_back({s, 0});
  }
  int d = 0, n = 0;
  for (size_t head = 0; head < queue_.size(); ++head) {
    auto [x, depth] = queue_[head];
    for (int ti : ranks[static_cast<size_t>(x)].blocks) {
      if (target_seen_[static_cast<size_t>(ti)] == epoch_) continue;
      target_seen_[static_cast<size_t>(ti)] = epoch_;
      for (int w : targets_[static_cast<size_t>(ti)].waiters) {
        if (rank_seen_[static_cast<size_t>(w)] == epoch_) continue;
        rank_seen_[static_cast<size_t>(w)] = epoch_;
        ++n;
        if (depth == 0) ++d;
        if (mark != nullptr) (*mark)[static_cast<size_t>(w)] = 1;
        queue_.push_back({w, depth + 1});
      }
    }
  }
  if (direct != nullptr) *direct = d;
  if (total != nullptr) *total = n;
}

void WaitForGraph::NewCollective(int ci, uint64_t seq) {
  targets_.emplace_back();
  Target& t = targets_.back();
  t.comm = ci;
  t.seq = seq;
  const CommInfo& c = snap_.comm(ci);
  const std::vector<RankInfo>& ranks = snap_.ranks();
  for (size_t k = 0; k < c.members.size(); ++k) {
    const int b = c.members[k];
    if (b < 0) {
      ++t.unknown_members;
      continue;
    }
    const RankInfo& rb = ranks[static_cast<size_t>(b)];
    const proto::CommRow* row = c.coll[k];
    if (rb.clean_exit && row != nullptr && row->completed_seq >= seq) {
      ++t.completed;  // it finished the collective, then its program ended normally
      continue;
    }
    if (rb.dead || rb.progress == nullptr || row == nullptr || row->started_seq < seq ||
        (rb.frozen && row->completed_seq < seq)) {
      t.blockers.push_back(b);
    } else if (row->completed_seq >= seq) {
      ++t.completed;
    }
  }
}

void WaitForGraph::AddP2p(int a, int ci, const proto::CommRow& row, int64_t now_unix_ms) {
  const CommInfo& c = snap_.comm(ci);
  targets_.emplace_back();
  Target& t = targets_.back();
  t.comm = ci;
  t.p2p = true;
  t.op = row.op;
  t.longest_wait_ms = WaitedMs(snap_.rank(a), row, now_unix_ms);
  t.waiters.push_back(a);
  t.example_row = &row;
  t.example_waiter = a;
  if (row.peer < 0 || row.peer >= static_cast<int64_t>(c.members.size())) {
    ++t.unknown_members;
    return;
  }
  const auto k = static_cast<size_t>(row.peer);
  const int p = c.members[k];
  if (p < 0) {
    ++t.unknown_members;
    return;
  }
  const RankInfo& rp = snap_.rank(p);
  const proto::CommRow* prow = c.p2p[k];
  const bool matching = !rp.dead && !rp.frozen && rp.progress != nullptr && prow != nullptr &&
                        prow->started_seq > prow->completed_seq &&
                        prow->peer == row.comm_rank && Complementary(row.op, prow->op);
  if (matching) {
    t.pair_peer = p;
    t.met_ms = std::min(t.longest_wait_ms, WaitedMs(rp, *prow, now_unix_ms));
  } else {
    t.blockers.push_back(p);
  }
}

bool WaitForGraph::PeerExitedAfterTheExchange(const RankInfo& waiter, int ci, const proto::CommRow& row) const {
  const CommInfo& c = snap_.comm(ci);
  if (row.peer < 0 || row.peer >= static_cast<int64_t>(c.members.size())) return false;
  const int p = c.members[static_cast<size_t>(row.peer)];
  if (p < 0) return false;
  const RankInfo& peer = snap_.rank(p);
  const proto::CommRow* peer_row = c.p2p[static_cast<size_t>(row.peer)];
  if (!peer.clean_exit || peer_row == nullptr || peer_row->started_seq > peer_row->completed_seq) {
    return false;
  }
  const int64_t exited_unix_ms = peer.exit_event != nullptr ? peer.exit_event->unix_ms
                                 : peer.progress != nullptr ? peer.progress->observed_unix_ms
                                                            : 0;
  return waiter.progress->observed_unix_ms <= exited_unix_ms + kClockSlackMs;
}

void WaitForGraph::FindMostCompleted() {
  const std::vector<CommInfo>& comms = snap_.comms();
  const std::vector<RankInfo>& ranks = snap_.ranks();
  most_completed_.assign(comms.size(), {0, -1});
  for (size_t ci = 0; ci < comms.size(); ++ci) {
    const CommInfo& c = comms[ci];
    for (size_t k = 0; k < c.coll.size(); ++k) {
      const proto::CommRow* row = c.coll[k];
      const int m = c.members[k];
      if (row == nullptr || m < 0) continue;
      const RankInfo& rm = ranks[static_cast<size_t>(m)];
      if (rm.dead && !rm.clean_exit) continue;
      if (row->completed_seq > most_completed_[ci].first) most_completed_[ci] = {row->completed_seq, m};
    }
  }
}

}  // namespace ft::master::attribution

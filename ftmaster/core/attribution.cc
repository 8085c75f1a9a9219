#include "ftmaster/core/attribution.h"

#include <fmt/format.h>
#include <string.h>

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ftmaster/core/text.h"
#include "proto/master_codec.h"

namespace ft::master {
namespace {

constexpr int kMaxCommSize = 1 << 20;  // beyond: a garbled value, not a communicator

constexpr double kConfCrash = 0.95;
constexpr double kConfFrozen = 0.9;
constexpr double kConfLaggard = 0.7;
constexpr double kConfComputeHang = 0.9;
constexpr double kConfHostHang = 0.85;
constexpr double kConfMissing = 0.5;
constexpr double kStaleFactor = 0.6;
constexpr double kConfTransport = 0.7;
constexpr double kConfTransportOdd = 0.5;
constexpr int64_t kClockSlackMs = 1000;  // two workers' clocks are compared no finer than this
constexpr double kConfCycle = 0.3;

// A send matches a receive: two sends (or two receives) toward each other are no pair.
bool Complementary(proto::OpKind a, proto::OpKind b) {
  if (a == proto::OpKind::kSend) return b != proto::OpKind::kSend;
  if (a == proto::OpKind::kRecv) return b != proto::OpKind::kRecv;
  return true;  // unknown kinds: do not rule the match out
}

// "allreduce", or `unknown` for no op.
std::string OpOr(proto::OpKind op, const char* unknown) {
  return op == proto::OpKind::kNone ? unknown : proto::OpKindName(op);
}

struct RankInfo {
  int rank = -1;
  const proto::RankProgress* progress = nullptr;
  const proto::Membership* member = nullptr;
  const proto::Event* exit_event = nullptr;
  const proto::Event* frozen_event = nullptr;  // the newest "frozen" event of the rank
  std::string node;
  bool dead = false;
  // Dead through its normal exit path: its last table is final, and what it shows completed
  // did complete (NCCL's finalize waited for it), unlike the table of a process that died.
  bool clean_exit = false;
  bool frozen = false;            // alive but cannot run: its table no longer moves
  // Gone after a signal told it to terminate (libft.so wrote it: a launcher's or scheduler's
  // SIGTERM), or stopped by its worker: asked to end, never a crash root.
  bool asked_to_end = false;
  bool stale = false;
  double report_age_ms = 0;
  bool waits = false;             // has a row on the GPU waiting on others
  // Laggard: its table shows collective lag_seq of comm lag_comm (index) in flight although
  // a live peer has completed it: the collective is over, the rank has stopped observing it.
  int lag_comm = -1;
  uint64_t lag_seq = 0;
  int lag_peer = -1;              // a member that completed it (rank index)
  double waited_ms = 0;           // the longest of those waits
  std::vector<int> blocks;        // targets this rank blocks
};

struct CommInfo {
  uint64_t id = 0;
  std::vector<int> members;                 // comm rank -> rank index, -1 unknown
  std::vector<const proto::CommRow*> coll;  // comm rank -> collective row
  std::vector<const proto::CommRow*> p2p;   // comm rank -> p2p row
  void Grow(int size) {
    if (size > static_cast<int>(members.size())) {
      members.resize(static_cast<size_t>(size), -1);
      coll.resize(static_cast<size_t>(size), nullptr);
      p2p.resize(static_cast<size_t>(size), nullptr);
    }
  }
};

// Something ranks wait on: a collective (comm, seq), or one p2p op of one waiter.
struct Target {
  int comm = -1;
  bool p2p = false;
  uint64_t seq = 0;                 // collective: the op waited on
  proto::OpKind op = proto::OpKind::kNone;  // its kind when known
  std::vector<int> waiters;
  std::vector<int> blockers;
  int unknown_members = 0;          // comm ranks no membership names
  int completed = 0;                // members that completed seq (transport oddity)
  int pair_peer = -1;               // p2p transport: the peer waiting toward the waiter
  const proto::CommRow* example_row = nullptr;  // a waiter's row (ages, op)
  int example_waiter = -1;
  double longest_wait_ms = 0;       // the longest any waiter's GPU has been in it
};

// How long, at decision time, the rank's GPU has been in the op its row waits in. Unknown
// ages count as forever: the filter this feeds must never hide a hang.
double WaitedMs(const RankInfo& r, const proto::CommRow& row, int64_t now_unix_ms) {
  if (row.started_age_ms < 0) return std::numeric_limits<double>::infinity();
  return row.started_age_ms + static_cast<double>(now_unix_ms - r.progress->observed_unix_ms);
}

class Snapshot {
 public:
  explicit Snapshot(const AttributionInput& in) {
    for (const proto::RankProgress& p : in.progress) AddProgress(&p);
    for (const proto::Event& e : in.events) {
      if (e.progress.rank >= 0) AddProgress(&e.progress);
    }
    for (const proto::Membership& m : in.membership) {
      if (m.rank < 0) continue;
      RankInfo& r = ranks_[static_cast<size_t>(IndexOf(m.rank))];
      if (r.member == nullptr || m.incarnation > r.member->incarnation) r.member = &m;
    }
    for (const proto::Event& e : in.events) {
      if (proto::Is(e, proto::EventKind::kExit) && e.rank >= 0) {
        ranks_[static_cast<size_t>(IndexOf(e.rank))].exit_event = &e;
      } else if (proto::Is(e, proto::EventKind::kFrozen) && e.rank >= 0) {
        const proto::Event*& f = ranks_[static_cast<size_t>(IndexOf(e.rank))].frozen_event;
        if (f == nullptr || e.unix_ms >= f->unix_ms) f = &e;
      }
    }
    for (RankInfo& r : ranks_) {
      if (r.progress != nullptr) {
        r.node = r.progress->node;
        r.report_age_ms = static_cast<double>(in.now_unix_ms - r.progress->observed_unix_ms);
        r.stale = r.report_age_ms > in.stale_ms;
      }
      if (r.node.empty() && r.member != nullptr) r.node = r.member->node;
      r.dead = r.exit_event != nullptr || (r.progress && proto::ProcessGone(r.progress->state)) ||
               (r.member && proto::ProcessGone(r.member->state));
      r.clean_exit = r.dead && (r.exit_event != nullptr
                                    ? proto::EndedCleanly(*r.exit_event)
                                    : (r.progress ? proto::Is(r.progress->state, proto::RankState::kExited)
                                                  : r.member && proto::Is(r.member->state, proto::RankState::kExited)));
      r.frozen = !r.dead && r.progress != nullptr && r.progress->frozen;
      r.asked_to_end = r.dead && !r.clean_exit &&
                       ((r.exit_event != nullptr && (r.exit_event->terminated_by_signal != 0 ||
                                                     proto::Is(r.exit_event->progress.state, proto::RankState::kStopped))) ||
                        (r.progress != nullptr && proto::Is(r.progress->state, proto::RankState::kStopped)));
      // Told to terminate, as an exit event of an earlier window said: a preempted rank's peers
      // may wait on it past that window (their own termination saves, one step more).
      if (r.dead && !r.clean_exit && !r.asked_to_end && in.teardown_deaths != nullptr) {
        const uint64_t incarnation = r.progress != nullptr ? r.progress->incarnation
                                     : r.member != nullptr ? r.member->incarnation
                                                           : 0;
        auto it = in.teardown_deaths->find(r.rank);
        r.asked_to_end = incarnation != 0 && it != in.teardown_deaths->end() && it->second == incarnation;
      }
    }
    // Communicators: membership first, then the rows themselves.
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const RankInfo& r = ranks_[i];
      if (r.member != nullptr) {
        for (const proto::CommMember& c : r.member->comms) {
          Place(c.comm_id, c.comm_rank, c.comm_size, static_cast<int>(i), nullptr, c.p2p);
        }
      }
      if (r.progress != nullptr) {
        for (const proto::CommRow& row : r.progress->comms) {
          Place(row.comm_id, row.comm_rank, row.comm_size, static_cast<int>(i), &row, row.p2p);
        }
      }
    }
  }

  std::vector<RankInfo>& ranks() { return ranks_; }
  std::vector<CommInfo>& comms() { return comms_; }
  int FindRank(int rank) const {
    auto it = rank_index_.find(rank);
    return it == rank_index_.end() ? -1 : it->second;
  }
  int FindComm(uint64_t id) const {
    auto it = comm_index_.find(id);
    return it == comm_index_.end() ? -1 : it->second;
  }

 private:
  int IndexOf(int rank) {
    auto [it, inserted] = rank_index_.emplace(rank, static_cast<int>(ranks_.size()));
    if (inserted) {
      ranks_.emplace_back();
      ranks_.back().rank = rank;
    }
    return it->second;
  }

  void AddProgress(const proto::RankProgress* p) {
    if (p->rank < 0) return;
    RankInfo& r = ranks_[static_cast<size_t>(IndexOf(p->rank))];
    if (r.progress == nullptr || p->observed_unix_ms > r.progress->observed_unix_ms) r.progress = p;
  }

  void Place(uint64_t id, int comm_rank, int comm_size, int rank_index, const proto::CommRow* row,
             bool p2p) {
    if (comm_size < 1 || comm_size > kMaxCommSize || comm_rank < 0 || comm_rank >= comm_size) return;
    auto [it, inserted] = comm_index_.emplace(id, static_cast<int>(comms_.size()));
    if (inserted) {
      comms_.emplace_back();
      comms_.back().id = id;
    }
    CommInfo& c = comms_[static_cast<size_t>(it->second)];
    c.Grow(comm_size);
    const auto k = static_cast<size_t>(comm_rank);
    c.members[k] = rank_index;
    if (row != nullptr) (p2p ? c.p2p : c.coll)[k] = row;
  }

  std::vector<RankInfo> ranks_;
  std::unordered_map<int, int> rank_index_;
  std::vector<CommInfo> comms_;
  std::unordered_map<uint64_t, int> comm_index_;
};

// ---- the graph --------------------------------------------------------------------------

class Graph {
 public:
  Graph(Snapshot& snap, const AttributionInput& in) : snap_(snap) {
    std::vector<RankInfo>& ranks = snap.ranks();
    FindMostCompleted();
    for (size_t a = 0; a < ranks.size(); ++a) {
      RankInfo& r = ranks[a];
      if (r.progress == nullptr || r.dead) continue;
      for (const proto::CommRow& row : r.progress->comms) {
        if (row.started_seq <= row.completed_seq) continue;
        const int ci = snap.FindComm(row.comm_id);
        if (ci < 0) continue;  // an invalid row (comm rank out of range): nothing to compare
        // A collective with a root: a member may finish its part before the others (a
        // broadcast's root once its data left, a reduce's non-roots once they forwarded
        // theirs), so "completed here, in flight there" is no evidence that the one in flight
        // has stopped observing.
        const bool rooted = row.entered_seq == row.completed_seq + 1 && proto::HasRoot(row.op);
        if (!row.p2p && (r.frozen || !rooted) &&
            most_completed_[static_cast<size_t>(ci)].first >= row.completed_seq + 1) {
          // A live member completed the collective this row shows in flight: it is over on the
          // GPUs, and this rank has not seen it end. It waits on nobody; the members waiting
          // in the next collective wait on it.
          if (r.lag_comm < 0) {
            r.lag_comm = ci;
            r.lag_seq = row.completed_seq + 1;
            r.lag_peer = most_completed_[static_cast<size_t>(ci)].second;
          }
          continue;
        }
        // A frozen rank waits on nothing: what its table shows in flight is where it stopped
        // looking, not what it waits for. It is a root if others wait on it.
        if (r.frozen) continue;
        if (row.p2p && PeerExitedAfterTheExchange(r, ci, row)) continue;
        r.waits = true;
        r.waited_ms = std::max(r.waited_ms, WaitedMs(r, row, in.now_unix_ms));
        if (row.p2p) {
          AddP2p(static_cast<int>(a), ci, row, in.now_unix_ms);
          continue;
        }
        const uint64_t seq = row.completed_seq + 1;
        auto key = std::pair<int, uint64_t>(ci, seq);
        auto [it, inserted] = collective_.emplace(key, static_cast<int>(targets_.size()));
        if (inserted) NewCollective(ci, seq);
        Target& t = targets_[static_cast<size_t>(it->second)];
        t.waiters.push_back(static_cast<int>(a));
        if (t.op == proto::OpKind::kNone && row.entered_seq == seq) t.op = row.op;
        if (t.example_row == nullptr) {
          t.example_row = &row;
          t.example_waiter = static_cast<int>(a);
        }
        t.longest_wait_ms = std::max(t.longest_wait_ms, WaitedMs(r, row, in.now_unix_ms));
      }
    }
    for (size_t ti = 0; ti < targets_.size(); ++ti) {
      for (int b : targets_[ti].blockers) {
        ranks[static_cast<size_t>(b)].blocks.push_back(static_cast<int>(ti));
      }
    }
  }

  std::vector<Target>& targets() { return targets_; }

  // Ranks reached from `sources` by following "blocks" edges backwards (who waits on them),
  // sources excluded. direct: those one step away.
  void Reach(const std::vector<int>& sources, int* direct, int* total, std::vector<char>* mark) {
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

 private:
  struct PairHash {
    size_t operator()(const std::pair<int, uint64_t>& k) const {
      return std::hash<uint64_t>()(k.second * 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(k.first));
    }
  };

  void NewCollective(int ci, uint64_t seq) {
    targets_.emplace_back();
    Target& t = targets_.back();
    t.comm = ci;
    t.seq = seq;
    const CommInfo& c = snap_.comms()[static_cast<size_t>(ci)];
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

  void AddP2p(int a, int ci, const proto::CommRow& row, int64_t now_unix_ms) {
    const CommInfo& c = snap_.comms()[static_cast<size_t>(ci)];
    targets_.emplace_back();
    Target& t = targets_.back();
    t.comm = ci;
    t.p2p = true;
    t.op = row.op;
    t.longest_wait_ms = WaitedMs(snap_.ranks()[static_cast<size_t>(a)], row, now_unix_ms);
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
    const RankInfo& rp = snap_.ranks()[static_cast<size_t>(p)];
    const proto::CommRow* prow = c.p2p[k];
    const bool matching = !rp.dead && !rp.frozen && rp.progress != nullptr && prow != nullptr &&
                          prow->started_seq > prow->completed_seq &&
                          prow->peer == row.comm_rank && Complementary(row.op, prow->op);
    if (matching) {
      t.pair_peer = p;
    } else {
      t.blockers.push_back(p);
    }
  }

  // A peer that exited cleanly with no p2p op in flight, seen waiting on by a table taken
  // before it exited (a second of slack for the two workers' clocks): the exchange ended and
  // the waiter's next report will say so. A table taken after the exit that still waits is a
  // rank left waiting on a peer that is gone.
  bool PeerExitedAfterTheExchange(const RankInfo& waiter, int ci, const proto::CommRow& row) const {
    const CommInfo& c = snap_.comms()[static_cast<size_t>(ci)];
    if (row.peer < 0 || row.peer >= static_cast<int64_t>(c.members.size())) return false;
    const int p = c.members[static_cast<size_t>(row.peer)];
    if (p < 0) return false;
    const RankInfo& peer = snap_.ranks()[static_cast<size_t>(p)];
    const proto::CommRow* peer_row = c.p2p[static_cast<size_t>(row.peer)];
    if (!peer.clean_exit || peer_row == nullptr || peer_row->started_seq > peer_row->completed_seq) {
      return false;
    }
    const int64_t exited_unix_ms = peer.exit_event != nullptr ? peer.exit_event->unix_ms
                                   : peer.progress != nullptr ? peer.progress->observed_unix_ms
                                                              : 0;
    return waiter.progress->observed_unix_ms <= exited_unix_ms + kClockSlackMs;
  }

  // Per communicator, the highest collective any live or cleanly exited member has completed,
  // and that member.
  void FindMostCompleted() {
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

  Snapshot& snap_;
  std::vector<std::pair<uint64_t, int>> most_completed_;  // by comm index
  std::vector<Target> targets_;
  std::unordered_map<std::pair<int, uint64_t>, int, PairHash> collective_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> rank_seen_;
  std::vector<uint32_t> target_seen_;
  std::vector<std::pair<int, int>> queue_;
};

// ---- wording ----------------------------------------------------------------------------

class Writer {
 public:
  Writer(Snapshot& snap, const AttributionInput& in) : snap_(snap), in_(in) {}

  std::string RankName(int idx) const {
    const RankInfo& r = snap_.ranks()[static_cast<size_t>(idx)];
    return r.node.empty() ? fmt::format("rank {}", r.rank)
                          : fmt::format("rank {} ({})", r.rank, r.node);
  }

  // "allreduce #812 of comm 3fa2..." or "p2p recv to peer rank 4 on comm 3fa2..."
  std::string What(const Target& t) const {
    const CommInfo& c = snap_.comms()[static_cast<size_t>(t.comm)];
    if (t.p2p) {
      const proto::CommRow* row = t.example_row;
      int peer = -1;
      if (row != nullptr && row->peer >= 0 && row->peer < static_cast<int64_t>(c.members.size())) {
        const int p = c.members[static_cast<size_t>(row->peer)];
        if (p >= 0) peer = snap_.ranks()[static_cast<size_t>(p)].rank;
      }
      const char* dir = "with";
      if (t.op == proto::OpKind::kRecv) dir = "from";
      if (t.op == proto::OpKind::kSend) dir = "to";
      return fmt::format("p2p {} {} rank {} on comm {}", OpOr(t.op, "op"), dir,
                         peer >= 0 ? std::to_string(peer) : std::string("?"), CommHex(c.id));
    }
    return fmt::format("{} #{} of comm {}", OpOr(t.op, "collective"), t.seq, CommHex(c.id));
  }

  // How long ago, at decision time, the waiter's GPU reached the op it waits in.
  double StartedAgo(const Target& t) const {
    if (t.example_row == nullptr || t.example_row->started_age_ms < 0) return -1;
    const RankInfo& w = snap_.ranks()[static_cast<size_t>(t.example_waiter)];
    return t.example_row->started_age_ms +
           static_cast<double>(in_.now_unix_ms - w.progress->observed_unix_ms);
  }

  // What the blocker has not done, seen from the blocker: a collective by name, or the p2p
  // op that would match the waiter's.
  std::string Blocked(const Target& t) const {
    if (!t.p2p) return What(t);
    return fmt::format("the p2p op matching {}'s {}", RankName(t.example_waiter), What(t));
  }

  // ", its table still shows allreduce #812 of comm 3fa2.. in flight, which rank 4 completed"
  // for a laggard; empty otherwise.
  std::string Lag(const RankInfo& r) const {
    if (r.lag_comm < 0) return {};
    const CommInfo& c = snap_.comms()[static_cast<size_t>(r.lag_comm)];
    proto::OpKind op = proto::OpKind::kNone;
    for (const proto::CommRow& row : r.progress->comms) {
      if (row.comm_id == c.id && !row.p2p && row.entered_seq == r.lag_seq && row.op != proto::OpKind::kNone) op = row.op;
    }
    return fmt::format(", its table still shows {} #{} of comm {} in flight, which {} completed",
                       OpOr(op, "collective"), r.lag_seq, CommHex(c.id), RankName(r.lag_peer));
  }

  std::string WaitLine(const Target& t) const {
    double ago = StartedAgo(t);
    std::string when = ago >= 0 ? fmt::format(" (GPU started {} ago)", HumanMs(ago)) : "";
    return fmt::format("{} waits on {}{}", RankName(t.example_waiter), What(t), when);
  }

 private:
  Snapshot& snap_;
  const AttributionInput& in_;
};

struct Builder {
  proto::Incident incident;
  double confidence = 1.0;
  int evidence_left_off = 0;
  int max_evidence = 20;
  bool pair = false;  // transport hang between two p2p peers

  // Once: an event line the incident already shows (its first events) is not repeated.
  void EvidenceOnce(std::string line) {
    if (std::find(incident.evidence.begin(), incident.evidence.end(), line) == incident.evidence.end()) {
      Evidence(std::move(line));
    }
  }
  void Evidence(std::string line) {
    if (static_cast<int>(incident.evidence.size()) < max_evidence) {
      incident.evidence.push_back(std::move(line));
    } else {
      ++evidence_left_off;
    }
  }
  void Suspect(int rank, std::string node, std::string why, double conf) {
    incident.suspects.push_back(proto::Suspect{rank, std::move(node), std::move(why)});
    confidence = std::min(confidence, conf);
  }
  proto::Incident Finish() {
    if (evidence_left_off > 0) {
      incident.evidence.push_back(fmt::format("... and {} more lines", evidence_left_off));
    }
    incident.confidence = incident.suspects.empty() ? std::min(confidence, kConfCycle) : confidence;
    return std::move(incident);
  }
};

// Why a process counts as frozen, from what its worker saw.
std::string FrozenHow(const proto::RankProgress& p) {
  std::string how;
  if (p.proc_state == "T") {
    how = "its process is stopped (state T: SIGSTOP/SIGTSTP, or a job-control stop)";
  } else if (p.proc_state == "t") {
    how = "its process is stopped by a tracer (state t: a debugger holds it)";
  } else {
    how = fmt::format("its process (state {}) has not run libft.so's poller", p.proc_state.empty() ? "?" : p.proc_state);
  }
  if (p.heartbeat_age_ms >= 0) how += fmt::format("; heartbeat silent for {}", HumanMs(p.heartbeat_age_ms));
  return how;
}

// How an exit event says the process ended, in words: never "code 0" for a death the worker
// could not read the status of.
std::string ExitHow(const proto::Event& e) {
  // A worker from before status_unknown wrote such a death as not clean with code 0.
  if (e.status_unknown || (!e.clean && e.code == 0)) return "gone, exit status unknown (killed or crashed)";
  if (e.code < 0) {
    const char* abbrev = sigabbrev_np(static_cast<int>(-e.code));
    return abbrev != nullptr ? fmt::format("killed by signal {} (SIG{})", -e.code, abbrev)
                             : fmt::format("killed by signal {}", -e.code);
  }
  if (proto::EndedCleanly(e)) return "exited cleanly (status 0)";
  return fmt::format("exited with status {}", e.code);
}

std::string EventLine(const proto::Event& e) {
  std::string who = e.node.empty() ? fmt::format("rank {}", e.rank)
                                   : fmt::format("rank {} ({})", e.rank, e.node);
  if (proto::Is(e, proto::EventKind::kTimeout)) {
    return fmt::format("timeout from {}: {} #{} of comm {} running {} (timeout {}), {}", who,
                       OpOr(e.op, "op"), e.seq, CommHex(e.comm_id), HumanMs(e.age_ms),
                       HumanMs(e.timeout_ms),
                       e.started ? "GPU waiting on peers" : "GPU had not reached it");
  }
  if (proto::Is(e, proto::EventKind::kExit)) {
    return fmt::format("exit of {}: {}{}", who, ExitHow(e),
                       e.terminated_by_signal != 0
                           ? fmt::format(" after signal {} told it to terminate", e.terminated_by_signal)
                           : std::string());
  }
  if (proto::Is(e, proto::EventKind::kFrozen)) {
    return fmt::format("frozen: {} for {} (process state {}, heartbeat silent {})", who,
                       HumanMs(e.age_ms), e.progress.proc_state.empty() ? "?" : e.progress.proc_state,
                       e.progress.heartbeat_age_ms >= 0 ? HumanMs(e.progress.heartbeat_age_ms)
                                                        : std::string("?"));
  }
  if (proto::Is(e, proto::EventKind::kError)) {
    return fmt::format("error from {}: {} {} returned {}", who, e.api, e.call, e.code);
  }
  return fmt::format("{} from {}{}{}", e.kind, who, e.message.empty() ? "" : ": ", e.message);
}

}  // namespace

std::vector<proto::Incident> Attribute(const AttributionInput& in, std::string* why_none) {
  if (why_none != nullptr) why_none->clear();
  Snapshot snap(in);
  Graph graph(snap, in);
  Writer writer(snap, in);
  std::vector<RankInfo>& ranks = snap.ranks();
  std::vector<Target>& targets = graph.targets();

  int64_t first = in.now_unix_ms;
  for (const proto::Event& e : in.events) first = std::min(first, e.unix_ms);
  std::vector<const proto::Event*> events;
  for (const proto::Event& e : in.events) events.push_back(&e);
  std::sort(events.begin(), events.end(),
            [](const proto::Event* a, const proto::Event* b) { return a->unix_ms < b->unix_ms; });

  auto start = [&](proto::IncidentKind kind_of, std::string suffix) {
    const char* kind = proto::IncidentKindName(kind_of);
    Builder b;
    b.max_evidence = std::max(1, in.max_evidence);
    b.incident.kind = kind;
    b.incident.id = fmt::format("{}-{}{}", first, kind, suffix);
    b.incident.first_event_unix_ms = first;
    b.incident.decided_unix_ms = in.now_unix_ms;
    b.incident.decide_ms = static_cast<double>(in.now_unix_ms - first);
    const size_t shown = std::min<size_t>(events.size(), 3);
    for (size_t i = 0; i < shown; ++i) b.Evidence(EventLine(*events[i]));
    if (events.size() > shown) {
      b.Evidence(fmt::format("{} more events in the window", events.size() - shown));
    }
    return b;
  };

  // Roots, and what they explain.
  std::vector<char> explained(ranks.size(), 0);
  std::vector<int> roots;
  for (size_t x = 0; x < ranks.size(); ++x) {
    if (!ranks[x].blocks.empty() && !ranks[x].waits) roots.push_back(static_cast<int>(x));
  }
  std::sort(roots.begin(), roots.end(),
            [&](int a, int b) { return ranks[static_cast<size_t>(a)].rank < ranks[static_cast<size_t>(b)].rank; });

  Builder hang = start(proto::IncidentKind::kHang, "");
  Builder crash = start(proto::IncidentKind::kCrash, "");
  Builder frozen = start(proto::IncidentKind::kHostFrozen, "");
  Builder busy = start(proto::IncidentKind::kBusy, "");
  busy.incident.decision = proto::DecisionKindName(proto::DecisionKind::kNone);
  std::vector<std::string> hang_summary, crash_summary, frozen_summary, busy_summary;

  // Deaths that are a teardown, not a crash: asked to end (a terminate signal, a stop by the
  // worker), or after another rank's clean exit (the job finishing, its launcher tearing down
  // the rest). The clean exits: the caller's, and those in the window.
  std::vector<int64_t> clean_exits(in.clean_exit_unix_ms.begin(), in.clean_exit_unix_ms.end());
  for (const proto::Event& e : in.events) {
    if (proto::EndedCleanly(e) && e.terminated_by_signal == 0) clean_exits.push_back(e.unix_ms);
  }
  std::sort(clean_exits.begin(), clean_exits.end());
  // Only a clean exit of the dying rank's own run counts: one before its process started ended
  // an earlier launch of the job (finished, then launched again under the same name).
  auto finishing = [&](const RankInfo& r) {
    if (r.exit_event == nullptr) return false;
    const int64_t died = r.exit_event->unix_ms;
    const int64_t started = static_cast<int64_t>(r.exit_event->progress.incarnation / 1000000);
    auto it = std::lower_bound(clean_exits.begin(), clean_exits.end(),
                               std::max(died - in.finish_teardown_ms, started));
    return it != clean_exits.end() && *it <= died;
  };
  std::vector<std::string> teardown;  // "5@node1 (signal 15)"
  std::vector<char> set_aside(ranks.size(), 0);
  auto teardown_death = [&](int x) {
    const RankInfo& r = ranks[static_cast<size_t>(x)];
    if (!r.dead || r.clean_exit) return false;
    if (!r.asked_to_end && !finishing(r)) return false;
    if (!set_aside[static_cast<size_t>(x)]) {
      set_aside[static_cast<size_t>(x)] = 1;
      std::string how = r.asked_to_end
                            ? (r.exit_event != nullptr && r.exit_event->terminated_by_signal != 0
                                   ? fmt::format("signal {}", r.exit_event->terminated_by_signal)
                                   : std::string("stopped by its worker"))
                            : std::string("after a clean exit");
      teardown.push_back(fmt::format("{}@{} ({})", r.rank, r.node, how));
    }
    return true;
  };
  std::vector<char> named(ranks.size(), 0);  // a suspect already (of any incident)

  for (int x : roots) {
    RankInfo& r = ranks[static_cast<size_t>(x)];
    int direct = 0, total = 0;
    graph.Reach({x}, &direct, &total, &explained);
    double longest = 0;
    for (int ti : r.blocks) longest = std::max(longest, targets[static_cast<size_t>(ti)].longest_wait_ms);
    if (longest < in.min_wait_ms) continue;  // peers only just arrived: a healthy collective
    if (teardown_death(x)) continue;  // its waiters are explained: the job is being ended
    named[static_cast<size_t>(x)] = 1;
    const Target& t = targets[static_cast<size_t>(r.blocks.front())];
    const std::string what = writer.Blocked(t);
    const std::string waiting =
        fmt::format("{} rank{} wait on it directly, {} in all", direct, direct == 1 ? "" : "s", total);
    std::string stale;
    double factor = 1.0;
    if (r.progress != nullptr && r.stale) {
      stale = fmt::format("its report is {} old (limit {}), so this may be out of date; ",
                          HumanMs(r.report_age_ms), HumanMs(in.stale_ms));
      factor = kStaleFactor;
    }
    Builder* into = &hang;
    std::string why;
    double conf = 0;
    std::string label;
    if (r.dead) {
      into = &crash;
      std::string how = r.exit_event != nullptr
                            ? fmt::format("process {}", ExitHow(*r.exit_event))
                            : fmt::format("process {}", r.progress && proto::ProcessGone(r.progress->state)
                                                            ? r.progress->state
                                                            : r.member->state);
      why = fmt::format("{}{}; others wait on it in {}; {}", stale, how, what, waiting);
      conf = (r.progress != nullptr || r.exit_event != nullptr ? kConfCrash : 0.8) * factor;
      label = "crash";
    } else if (r.progress == nullptr) {
      why = fmt::format("no progress report (its worker may be down, or it never started "
                        "monitoring); others wait on it in {}; {}", what, waiting);
      conf = kConfMissing;
      label = "report missing";
    } else if (r.frozen) {
      into = &frozen;
      why = fmt::format("{}host frozen: {}; others wait on it in {}{}; {}", stale, FrozenHow(*r.progress),
                        what, writer.Lag(r), waiting);
      conf = kConfFrozen * factor;
      label = "host frozen";
    } else if (r.progress->busy) {
      into = &busy;
      why = fmt::format("{}busy on the host (last CUDA/NCCL call {} ago, cpu {:.0f}%), not "
                        "stuck: it has not reached {} yet; {}",
                        stale, HumanMs(r.progress->last_call_age_ms), r.progress->cpu_pct, what,
                        waiting);
      conf = kConfHostHang * factor;
      label = "busy";
    } else {
      // The rank's own row on the blocked comm, and any row whose GPU is behind its host.
      const proto::CommRow* own = nullptr;
      const proto::CommRow* behind = nullptr;
      const CommInfo& c = snap.comms()[static_cast<size_t>(t.comm)];
      for (const proto::CommRow& row : r.progress->comms) {
        if (row.comm_id == c.id && row.p2p == t.p2p) own = &row;
        if (row.entered_seq > row.started_seq && behind == nullptr) behind = &row;
      }
      if (own != nullptr && own->entered_seq > own->started_seq) behind = own;
      if (r.lag_comm >= 0) {
        why = fmt::format(
            "{}lagging: {}, so its host has stopped observing its GPU (a frozen process, or "
            "libft.so's poller stuck; heartbeat {}); others wait on it in {}; {}",
            stale, writer.Lag(r).substr(2),
            r.progress->heartbeat_age_ms >= 0 ? HumanMs(r.progress->heartbeat_age_ms) + " old"
                                               : std::string("unknown"),
            what, waiting);
        conf = kConfLaggard * factor;
        label = "lagging";
      } else if (behind != nullptr) {
        why = fmt::format(
            "{}compute hang: GPU stuck in its own work before {} (on comm {} its host entered "
            "#{} {} ago, its GPU started only #{}); {}",
            stale, what, CommHex(behind->comm_id), behind->entered_seq,
            HumanMs(behind->entered_age_ms), behind->started_seq, waiting);
        conf = kConfComputeHang * factor;
        label = "compute hang";
      } else {
        why = fmt::format(
            "{}host hang: never entered {} (nothing queued on its GPU; last CUDA/NCCL call {} "
            "ago, cpu {:.0f}%, in a synchronizing call: {}); {}",
            stale, what, HumanMs(r.progress->last_call_age_ms), r.progress->cpu_pct,
            r.progress->blocked_ms > 0 ? HumanMs(r.progress->blocked_ms) : std::string("no"),
            waiting);
        conf = kConfHostHang * factor;
        label = "host hang";
      }
    }
    into->Suspect(r.rank, r.node, why, conf);
    into->Evidence(fmt::format("{}, blocked by {}", writer.WaitLine(t), writer.RankName(x)));
    if (r.blocks.size() > 1) {
      into->Evidence(fmt::format("{} blocks {} ops in all", writer.RankName(x), r.blocks.size()));
    }
    std::string entry = fmt::format("{}@{} ({})", r.rank, r.node, label);
    (into == &crash    ? crash_summary
     : into == &busy   ? busy_summary
     : into == &frozen ? frozen_summary
                       : hang_summary)
        .push_back(entry);
  }

  // Dead or frozen on their own: an incident whether or not a peer is seen waiting on them
  // (in NCCL): peers may wait elsewhere, or be between collectives.
  std::vector<int> alone;
  for (size_t x = 0; x < ranks.size(); ++x) {
    if (!named[x]) alone.push_back(static_cast<int>(x));
  }
  std::sort(alone.begin(), alone.end(),
            [&](int a, int b) { return ranks[static_cast<size_t>(a)].rank < ranks[static_cast<size_t>(b)].rank; });
  for (int x : alone) {
    const RankInfo& r = ranks[static_cast<size_t>(x)];
    if (r.dead && !r.clean_exit && r.exit_event != nullptr && !teardown_death(x)) {
      const proto::Event& e = *r.exit_event;
      crash.Suspect(
          r.rank, r.node,
          fmt::format("process {} while the job ran; no peer is "
                      "seen waiting on it inside NCCL (peers may wait outside it: a CPU collective, "
                      "a store barrier, a data loader; or be between collectives), and the job cannot "
                      "go on without it",
                      ExitHow(e)),
          kConfCrash);
      crash.EvidenceOnce(EventLine(e));
      crash_summary.push_back(fmt::format("{}@{} (gone)", r.rank, r.node));
    } else if (r.frozen && r.frozen_event != nullptr && r.progress != nullptr) {
      frozen.Suspect(
          r.rank, r.node,
          fmt::format("host frozen: {}; frozen for {} when its worker raised the event; no peer is "
                      "seen waiting on it inside NCCL yet, but it cannot make progress and its peers "
                      "wait on it wherever they meet it next",
                      FrozenHow(*r.progress), HumanMs(r.frozen_event->age_ms)),
          r.stale ? kConfFrozen * kStaleFactor : kConfFrozen);
      frozen.EvidenceOnce(EventLine(*r.frozen_event));
      frozen_summary.push_back(fmt::format("{}@{} (frozen)", r.rank, r.node));
    }
  }
  // A cascade (one rank dies, the launcher or NCCL takes the rest down): which process ended
  // first and how, by the workers' own clocks (NTP keeps nodes within milliseconds; the events'
  // order in Redis is the order they were read, not the order they happened).
  if (!crash.incident.suspects.empty()) {
    std::vector<const RankInfo*> deaths;
    for (const RankInfo& r : ranks) {
      if (r.dead && !r.clean_exit && r.exit_event != nullptr) deaths.push_back(&r);
    }
    std::sort(deaths.begin(), deaths.end(), [](const RankInfo* a, const RankInfo* b) {
      return a->exit_event->unix_ms != b->exit_event->unix_ms ? a->exit_event->unix_ms < b->exit_event->unix_ms
                                                              : a->rank < b->rank;
    });
    if (deaths.size() > 1) {
      const int64_t t0 = deaths.front()->exit_event->unix_ms;
      std::string then;
      for (size_t i = 1; i < deaths.size() && i < 4; ++i) {
        then += fmt::format("{}{}@{} +{} ms", i == 1 ? "" : ", ", deaths[i]->rank, deaths[i]->node,
                            deaths[i]->exit_event->unix_ms - t0);
      }
      if (deaths.size() > 4) then += fmt::format(", and {} more", deaths.size() - 4);
      crash.Evidence(fmt::format("first to fail (by the workers' clocks): rank {} on {}, {}; then {}",
                                 deaths.front()->rank, deaths.front()->node, ExitHow(*deaths.front()->exit_event),
                                 then));
    }
  }
  if (!teardown.empty() && !crash.incident.suspects.empty()) {
    std::string list;
    for (size_t i = 0; i < teardown.size() && i < 8; ++i) list += (i ? ", " : "") + teardown[i];
    if (teardown.size() > 8) list += fmt::format(", and {} more", teardown.size() - 8);
    crash.Evidence(fmt::format("not roots: {} ended after being told to (a launcher's teardown): {}",
                               teardown.size(), list));
  }

  std::vector<proto::Incident> out;

  // Transport hangs: collectives nobody blocks, and p2p pairs waiting on each other.
  std::unordered_map<int, Builder> transports;  // by comm index
  std::vector<int> transport_order;
  // Members per comm, collected with repeats and made unique once by sorting: a world-sized
  // communicator must not cost members x members (131k ranks: minutes).
  std::unordered_map<int, std::vector<int>> transport_members;
  std::unordered_set<int> whole_comm_listed;
  for (const Target& t : targets) {
    const bool pair = t.p2p && t.pair_peer >= 0;
    const bool stuck_collective = !t.p2p && t.blockers.empty() && t.unknown_members == 0;
    if (!pair && !stuck_collective) continue;
    if (t.longest_wait_ms < in.min_wait_ms) {  // in flight, healthy so far
      for (int w : t.waiters) explained[static_cast<size_t>(w)] = 1;
      graph.Reach(t.waiters, nullptr, nullptr, &explained);
      continue;
    }
    const CommInfo& c = snap.comms()[static_cast<size_t>(t.comm)];
    auto [it, inserted] = transports.try_emplace(t.comm);
    Builder& b = it->second;
    if (inserted) {
      b = start(proto::IncidentKind::kTransportHang, "-" + CommHex(c.id));
      b.incident.comm_id = c.id;
      transport_order.push_back(t.comm);
    }
    std::vector<int>& members = transport_members[t.comm];
    if (pair) {
      members.push_back(t.waiters.front());
      members.push_back(t.pair_peer);
      b.Evidence(fmt::format("{}; that peer's GPU is in the matching op toward it: neither "
                             "completes", writer.WaitLine(t)));
      b.pair = true;
      b.confidence = std::min(b.confidence, kConfTransport);
    } else {
      if (whole_comm_listed.insert(t.comm).second) {
        members.insert(members.end(), c.members.begin(), c.members.end());
      }
      double ago = writer.StartedAgo(t);
      if (t.completed == 0) {
        b.Evidence(fmt::format("all {} members started {} ({} ago), none completed it",
                               c.members.size(), writer.What(t), HumanMs(ago)));
        b.confidence = std::min(b.confidence, kConfTransport);
      } else {
        b.Evidence(fmt::format("all {} members started {} ({} ago); {} completed it while "
                               "others still wait (reports from different moments?)",
                               c.members.size(), writer.What(t), HumanMs(ago), t.completed));
        b.confidence = std::min(b.confidence, kConfTransportOdd);
      }
    }
  }
  for (int ci : transport_order) {
    Builder& b = transports[ci];
    std::vector<int>& members = transport_members[ci];
    std::sort(members.begin(), members.end(), [&](int a, int c) {
      return ranks[static_cast<size_t>(a)].rank < ranks[static_cast<size_t>(c)].rank;
    });
    members.erase(std::unique(members.begin(), members.end()), members.end());
    std::unordered_set<std::string_view> node_set;
    std::vector<std::string_view> nodes;
    for (int m : members) {
      const std::string& node = ranks[static_cast<size_t>(m)].node;
      if (node_set.insert(node).second) nodes.push_back(node);
    }
    int direct = 0, total = 0;
    graph.Reach(members, &direct, &total, &explained);
    for (int m : members) explained[static_cast<size_t>(m)] = 1;
    const std::string where =
        nodes.size() == 1
            ? fmt::format("all on node {}: suspect that node's GPUs or intra-node links", nodes[0])
            : fmt::format("spanning {} nodes: suspect the network between them", nodes.size());
    for (int m : members) {
      const RankInfo& r = ranks[static_cast<size_t>(m)];
      const std::string comm = CommHex(snap.comms()[static_cast<size_t>(ci)].id);
      b.Suspect(r.rank, r.node,
                b.pair ? fmt::format("in a p2p op on comm {} whose peer is in the matching op: "
                                     "neither completes ({})", comm, where)
                       : fmt::format("member of comm {}, whose op started on every member and "
                                     "completes on none ({})", comm, where),
                b.confidence);
    }
    b.incident.message = fmt::format(
        "transport hang on comm {}: {} members {}; {} other rank{} on them",
        CommHex(snap.comms()[static_cast<size_t>(ci)].id), members.size(), where, total,
        total == 1 ? " waits" : "s wait");
  }

  // Waiters nothing explains: a cycle, or reports from different moments.
  std::vector<int> cycle;
  int unexplained = 0;
  for (size_t x = 0; x < ranks.size(); ++x) {
    if (!ranks[x].waits || explained[x] || ranks[x].waited_ms < in.min_wait_ms) continue;
    ++unexplained;
    if (!ranks[x].blocks.empty()) cycle.push_back(static_cast<int>(x));
  }
  if (unexplained > 0) {
    const size_t kMaxCycleSuspects = 16;
    for (size_t i = 0; i < cycle.size() && i < kMaxCycleSuspects; ++i) {
      const RankInfo& r = ranks[static_cast<size_t>(cycle[i])];
      hang.Suspect(r.rank, r.node,
                   "in a wait-for cycle: it waits on ranks that wait on it; the reports were "
                   "probably taken at different moments",
                   kConfCycle);
      hang_summary.push_back(fmt::format("{}@{} (cycle)", r.rank, r.node));
    }
    int unknown = 0;
    for (const Target& t : targets) unknown += t.unknown_members > 0 ? 1 : 0;
    hang.Evidence(fmt::format("{} waiting ranks lead to no stuck rank{}", unexplained,
                              unknown > 0 ? fmt::format("; {} ops wait on comm ranks no "
                                                        "membership names", unknown)
                                          : std::string()));
    hang.confidence = std::min(hang.confidence, kConfCycle);
  }

  auto summarize = [](const std::vector<std::string>& parts) {
    std::string text;
    for (size_t i = 0; i < parts.size() && i < 8; ++i) text += (i ? ", " : "") + parts[i];
    if (parts.size() > 8) text += fmt::format(", and {} more", parts.size() - 8);
    return text;
  };
  auto waited_on = [](const std::vector<std::string>& summary) {
    for (const std::string& s : summary) {
      if (s.find("(gone)") == std::string::npos && s.find("(frozen)") == std::string::npos) return true;
    }
    return false;
  };
  if (!crash.incident.suspects.empty()) {
    const size_t n = crash.incident.suspects.size();
    crash.incident.message =
        waited_on(crash_summary)
            ? fmt::format("{} rank{} gone while others wait on {}: {}", n, n == 1 ? "" : "s",
                          n == 1 ? "it" : "them", summarize(crash_summary))
            : fmt::format("{} rank{} of the running job gone without a clean exit: {}", n,
                          n == 1 ? "" : "s", summarize(crash_summary));
    out.push_back(crash.Finish());
  }
  if (!frozen.incident.suspects.empty()) {
    const size_t n = frozen.incident.suspects.size();
    frozen.incident.message =
        waited_on(frozen_summary)
            ? fmt::format("{} rank{} frozen (alive, but {} cannot run) while others wait on {}: {}",
                          n, n == 1 ? "" : "s", n == 1 ? "it" : "they", n == 1 ? "it" : "them",
                          summarize(frozen_summary))
            : fmt::format("{} rank{} frozen past FT_FROZEN_AFTER (alive, but {} cannot run): {}", n,
                          n == 1 ? "" : "s", n == 1 ? "it" : "they", summarize(frozen_summary));
    out.push_back(frozen.Finish());
  }
  if (!hang.incident.suspects.empty() || unexplained > 0) {
    hang.incident.message =
        hang.incident.suspects.empty()
            ? fmt::format("{} ranks wait but no stuck rank can be named", unexplained)
            : fmt::format("{} rank{} stuck, the job waits on {}: {}", hang.incident.suspects.size(),
                          hang.incident.suspects.size() == 1 ? "" : "s",
                          hang.incident.suspects.size() == 1 ? "it" : "them",
                          summarize(hang_summary));
    out.push_back(hang.Finish());
  }
  for (int ci : transport_order) out.push_back(transports[ci].Finish());
  if (!busy.incident.suspects.empty()) {
    busy.incident.message = fmt::format(
        "others wait on {} busy rank{} (not a hang; no action): {}", busy.incident.suspects.size(),
        busy.incident.suspects.size() == 1 ? "" : "s", summarize(busy_summary));
    out.push_back(busy.Finish());
  }
  if (out.empty() && why_none != nullptr && !teardown.empty()) {
    *why_none = fmt::format("{} rank{} ended after being told to or after a clean exit of the job "
                            "(a teardown, not a crash): {}",
                            teardown.size(), teardown.size() == 1 ? "" : "s", summarize(teardown));
  }
  return out;
}

bool WindowCanClose(const AttributionInput& in, int64_t hang_window_ms) {
  if (in.events.empty()) return true;
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const proto::Event& e : in.events) first = std::min(first, e.unix_ms);
  if (in.now_unix_ms - first >= hang_window_ms) return true;

  Snapshot snap(in);
  std::vector<RankInfo>& ranks = snap.ranks();
  std::vector<char> comm_in(snap.comms().size(), 0);
  std::vector<int> queue;
  auto add_comm = [&](uint64_t id) {
    int ci = snap.FindComm(id);
    if (ci >= 0 && !comm_in[static_cast<size_t>(ci)]) {
      comm_in[static_cast<size_t>(ci)] = 1;
      queue.push_back(ci);
    }
  };
  auto fresh = [&](const RankInfo& r) {
    return r.dead || (r.progress != nullptr && r.progress->observed_unix_ms >= first);
  };
  for (const proto::Event& e : in.events) {
    if (proto::Is(e, proto::EventKind::kTimeout) && e.comm_id != 0) {
      add_comm(e.comm_id);
      continue;
    }
    int x = snap.FindRank(e.rank);
    if (x < 0) continue;
    const RankInfo& r = ranks[static_cast<size_t>(x)];
    if (!fresh(r)) return false;
    if (r.member != nullptr) {
      for (const proto::CommMember& c : r.member->comms) add_comm(c.comm_id);
    }
    if (r.progress != nullptr) {
      for (const proto::CommRow& row : r.progress->comms) add_comm(row.comm_id);
    }
  }
  for (size_t head = 0; head < queue.size(); ++head) {
    const CommInfo& c = snap.comms()[static_cast<size_t>(queue[head])];
    for (int m : c.members) {
      if (m < 0) return false;  // a member nobody has named yet
      const RankInfo& r = ranks[static_cast<size_t>(m)];
      if (!fresh(r)) return false;
      if (r.dead || r.progress == nullptr) continue;
      for (const proto::CommRow& row : r.progress->comms) {
        if (row.started_seq > row.completed_seq) add_comm(row.comm_id);
      }
    }
  }
  return true;
}

}  // namespace ft::master

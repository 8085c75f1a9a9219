#include "ftmaster/core/attribution_classify.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

namespace ft::master::attribution {
namespace {

// Deaths that are a teardown, not a crash: asked to end (a terminate signal, a stop by the
// worker), or after another rank's clean exit (the job finishing, its launcher tearing down the
// rest). The clean exits: the caller's, and those in the window.
class Teardown {
 public:
  Teardown(const Snapshot& snap, const AttributionInput& in)
      : snap_(snap), finish_teardown_ms_(in.finish_teardown_ms), set_aside_(snap.ranks().size(), 0) {
    clean_exits_.assign(in.clean_exit_unix_ms.begin(), in.clean_exit_unix_ms.end());
    for (const proto::Event& e : in.events) {
      if (proto::EndedCleanly(e) && e.terminated_by_signal == 0) clean_exits_.push_back(e.unix_ms);
    }
    std::sort(clean_exits_.begin(), clean_exits_.end());
  }

  // Whether rank index x died in a teardown; the first time, it is set aside in *teardown.
  bool Death(int x, std::vector<int>* teardown) {
    const RankInfo& r = snap_.rank(x);
    if (!r.dead || r.clean_exit) return false;
    if (!r.asked_to_end && !Finishing(r)) return false;
    if (!set_aside_[static_cast<size_t>(x)]) {
      set_aside_[static_cast<size_t>(x)] = 1;
      teardown->push_back(x);
    }
    return true;
  }

 private:
  // Only a clean exit of the dying rank's own run counts: one before its process started ended
  // an earlier launch of the job (finished, then launched again under the same name).
  bool Finishing(const RankInfo& r) const {
    if (r.exit_event == nullptr) return false;
    const int64_t died = r.exit_event->unix_ms;
    const int64_t started = static_cast<int64_t>(r.exit_event->progress.incarnation / 1000000);
    auto it = std::lower_bound(clean_exits_.begin(), clean_exits_.end(),
                               std::max(died - finish_teardown_ms_, started));
    return it != clean_exits_.end() && *it <= died;
  }

  const Snapshot& snap_;
  const int64_t finish_teardown_ms_;
  std::vector<int64_t> clean_exits_;
  std::vector<char> set_aside_;
};

class Classifier {
 public:
  Classifier(Snapshot& snap, WaitForGraph& graph, const AttributionInput& in)
      : snap_(snap), graph_(graph), in_(in), teardown_(snap, in), explained_(snap.ranks().size(), 0),
        named_(snap.ranks().size(), 0) {}

  Findings Run() {
    Roots();
    Alone();
    Transports();
    Unexplained();
    return std::move(out_);
  }

 private:
  std::vector<int> ByRank(std::vector<int> indexes) const {
    std::sort(indexes.begin(), indexes.end(), [&](int a, int b) { return snap_.rank(a).rank < snap_.rank(b).rank; });
    return indexes;
  }

  // Roots: block others, wait on nothing. Those nobody has waited on for min_wait_ms are a
  // healthy collective; those that died in a teardown explain their waiters, named by no one.
  void Roots() {
    std::vector<int> roots;
    for (size_t x = 0; x < snap_.ranks().size(); ++x) {
      const RankInfo& r = snap_.rank(static_cast<int>(x));
      if (!r.blocks.empty() && !r.waits) roots.push_back(static_cast<int>(x));
    }
    for (int x : ByRank(std::move(roots))) {
      const RankInfo& r = snap_.rank(x);
      RootFinding f;
      f.rank = x;
      graph_.Reach({x}, &f.direct, &f.total, &explained_);
      double longest = 0;
      for (int ti : r.blocks) longest = std::max(longest, graph_.target(ti).longest_wait_ms);
      if (longest < in_.min_wait_ms) continue;  // peers only just arrived: a healthy collective
      if (teardown_.Death(x, &out_.teardown)) continue;  // its waiters are explained: the job is being ended
      named_[static_cast<size_t>(x)] = 1;
      f.target = r.blocks.front();
      ClassifyRoot(r, &f);
      out_.roots.push_back(f);
    }
  }

  void ClassifyRoot(const RankInfo& r, RootFinding* f) const {
    const double factor = r.progress != nullptr && r.stale ? kStaleFactor : 1.0;
    if (r.dead) {
      f->kind = RootKind::kCrash;
      f->confidence = (r.progress != nullptr || r.exit_event != nullptr ? kConfCrash : kConfCrashNoReport) * factor;
    } else if (r.progress == nullptr) {
      f->kind = RootKind::kMissing;
      f->confidence = kConfMissing;
    } else if (r.frozen) {
      f->kind = RootKind::kFrozen;
      f->confidence = kConfFrozen * factor;
    } else if (r.progress->busy) {
      f->kind = RootKind::kBusy;
      f->confidence = kConfHostHang * factor;
    } else if (r.lag_comm >= 0) {
      f->kind = RootKind::kLagging;
      f->confidence = kConfLaggard * factor;
    } else if ((f->behind = BehindRow(r, graph_.target(f->target))) != nullptr) {
      f->kind = RootKind::kComputeHang;
      f->confidence = kConfComputeHang * factor;
    } else {
      f->kind = RootKind::kHostHang;
      f->confidence = kConfHostHang * factor;
    }
  }

  // A row of the rank whose GPU is behind its host (entered > started), its own row on the
  // blocked comm first; nullptr when none is.
  const proto::CommRow* BehindRow(const RankInfo& r, const Target& t) const {
    const proto::CommRow* own = nullptr;
    const proto::CommRow* behind = nullptr;
    const CommInfo& c = snap_.comm(t.comm);
    for (const proto::CommRow& row : r.progress->comms) {
      if (row.comm_id == c.id && row.p2p == t.p2p) own = &row;
      if (row.entered_seq > row.started_seq && behind == nullptr) behind = &row;
    }
    if (own != nullptr && own->entered_seq > own->started_seq) behind = own;
    return behind;
  }

  // Dead or frozen on their own: an incident whether or not a peer is seen waiting on them (in
  // NCCL): peers may wait elsewhere, or be between collectives.
  void Alone() {
    std::vector<int> alone;
    for (size_t x = 0; x < snap_.ranks().size(); ++x) {
      if (!named_[x]) alone.push_back(static_cast<int>(x));
    }
    for (int x : ByRank(std::move(alone))) {
      const RankInfo& r = snap_.rank(x);
      if (r.dead && !r.clean_exit && r.exit_event != nullptr && !teardown_.Death(x, &out_.teardown)) {
        out_.alone.push_back({x, true, kConfCrash});
      } else if (r.frozen && r.frozen_event != nullptr && r.progress != nullptr) {
        out_.alone.push_back({x, false, r.stale ? kConfFrozen * kStaleFactor : kConfFrozen});
      }
    }
  }

  // Transport hangs: collectives nobody blocks, and p2p pairs waiting on each other. Members
  // per comm are collected with repeats and made unique once by sorting: a world-sized
  // communicator must not cost members x members (131k ranks: minutes).
  void Transports() {
    std::unordered_map<int, size_t> of_comm;  // comm index -> out_.transports index
    std::unordered_set<int> whole_comm_listed;
    for (size_t ti = 0; ti < graph_.targets().size(); ++ti) {
      const Target& t = graph_.targets()[ti];
      const bool pair = t.p2p && t.pair_peer >= 0;
      const bool stuck_collective = !t.p2p && t.blockers.empty() && t.unknown_members == 0;
      if (!pair && !stuck_collective) continue;
      // In flight, healthy so far: its last member (a pair's later side) arrived less than the
      // least timeout ago. A rank that reached its peers late (a start-up restore, a slow step)
      // is no broken transport; if the op stays stuck, that member's own timeout names it.
      if (t.met_ms < in_.min_wait_ms) {
        for (int w : t.waiters) explained_[static_cast<size_t>(w)] = 1;
        graph_.Reach(t.waiters, nullptr, nullptr, &explained_);
        continue;
      }
      auto [it, inserted] = of_comm.try_emplace(t.comm, out_.transports.size());
      if (inserted) out_.transports.emplace_back().comm = t.comm;
      TransportFinding& f = out_.transports[it->second];
      f.targets.push_back(static_cast<int>(ti));
      if (pair) {
        f.members.push_back(t.waiters.front());
        f.members.push_back(t.pair_peer);
        f.pair = true;
        f.confidence = std::min(f.confidence, kConfTransport);
      } else {
        if (whole_comm_listed.insert(t.comm).second) {
          const CommInfo& c = snap_.comm(t.comm);
          f.members.insert(f.members.end(), c.members.begin(), c.members.end());
        }
        f.confidence = std::min(f.confidence, t.completed == 0 ? kConfTransport : kConfTransportOdd);
      }
    }
    for (TransportFinding& f : out_.transports) {
      f.members = ByRank(std::move(f.members));
      f.members.erase(std::unique(f.members.begin(), f.members.end()), f.members.end());
      graph_.Reach(f.members, nullptr, &f.total, &explained_);
      for (int m : f.members) explained_[static_cast<size_t>(m)] = 1;
    }
  }

  // Waiters nothing explains: a cycle, or reports from different moments.
  void Unexplained() {
    for (size_t x = 0; x < snap_.ranks().size(); ++x) {
      const RankInfo& r = snap_.rank(static_cast<int>(x));
      if (!r.waits || explained_[x] || r.waited_ms < in_.min_wait_ms) continue;
      ++out_.unexplained;
      if (!r.blocks.empty() && out_.cycle.size() < Findings::kMaxCycleSuspects) out_.cycle.push_back(static_cast<int>(x));
    }
    for (const Target& t : graph_.targets()) out_.unknown_ops += t.unknown_members > 0 ? 1 : 0;
  }

  Snapshot& snap_;
  WaitForGraph& graph_;
  const AttributionInput& in_;
  Teardown teardown_;
  std::vector<char> explained_;  // waiters a root or a transport hang explains
  std::vector<char> named_;      // a root suspect already
  Findings out_;
};

}  // namespace

Findings Classify(Snapshot& snap, WaitForGraph& graph, const AttributionInput& in) {
  return Classifier(snap, graph, in).Run();
}

}  // namespace ft::master::attribution

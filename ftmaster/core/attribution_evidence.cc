#include "ftmaster/core/attribution_evidence.h"

#include <fmt/format.h>
#include <string.h>

#include <algorithm>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "ftmaster/core/text.h"
#include "proto/master_codec.h"

namespace ft::master::attribution {
namespace {

// "allreduce", or `unknown` for no op.
std::string OpOr(proto::OpKind op, const char* unknown) {
  return op == proto::OpKind::kNone ? unknown : proto::OpKindName(op);
}

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

// "process 4242" where the rank's pid is known (its exit event, its last report, its
// membership), else "process": the pid is what finds its core dump and its node's log lines.
std::string ProcessOf(const RankInfo& r) {
  int pid = r.exit_event != nullptr ? r.exit_event->progress.pid : 0;
  if (pid <= 0 && r.progress != nullptr) pid = r.progress->pid;
  if (pid <= 0 && r.member != nullptr) pid = r.member->pid;
  return pid > 0 ? fmt::format("process {}", pid) : std::string("process");
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

// "a, b, c, and 5 more": at most eight parts.
std::string Summarize(const std::vector<std::string>& parts) {
  std::string text;
  for (size_t i = 0; i < parts.size() && i < 8; ++i) text += (i ? ", " : "") + parts[i];
  if (parts.size() > 8) text += fmt::format(", and {} more", parts.size() - 8);
  return text;
}

// The ranks, ops and waits of the graph in words.
class Wording {
 public:
  Wording(const Snapshot& snap, const AttributionInput& in) : snap_(snap), in_(in) {}

  std::string RankName(int idx) const {
    const RankInfo& r = snap_.rank(idx);
    return r.node.empty() ? fmt::format("rank {}", r.rank) : fmt::format("rank {} ({})", r.rank, r.node);
  }

  // "allreduce #812 of comm 3fa2..." or "p2p recv to peer rank 4 on comm 3fa2..."
  std::string What(const Target& t) const {
    const CommInfo& c = snap_.comm(t.comm);
    if (t.p2p) {
      const proto::CommRow* row = t.example_row;
      int peer = -1;
      if (row != nullptr && row->peer >= 0 && row->peer < static_cast<int64_t>(c.members.size())) {
        const int p = c.members[static_cast<size_t>(row->peer)];
        if (p >= 0) peer = snap_.rank(p).rank;
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
    const RankInfo& w = snap_.rank(t.example_waiter);
    return t.example_row->started_age_ms + static_cast<double>(in_.now_unix_ms - w.progress->observed_unix_ms);
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
    const CommInfo& c = snap_.comm(r.lag_comm);
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
  const Snapshot& snap_;
  const AttributionInput& in_;
};

// One incident being written: evidence capped at max_evidence, its confidence the lowest of
// its suspects', and the "rank@node (label)" summary its message lists.
struct Builder {
  proto::Incident incident;
  double confidence = 1.0;
  int evidence_left_off = 0;
  int max_evidence = 20;
  std::vector<std::string> summary;

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
  // Whether a peer is seen waiting on any of its suspects (not only gone or frozen on their own).
  bool WaitedOn() const {
    for (const std::string& s : summary) {
      if (s.find("(gone)") == std::string::npos && s.find("(frozen)") == std::string::npos) return true;
    }
    return false;
  }
};

class IncidentWriter {
 public:
  IncidentWriter(const Findings& f, const Snapshot& snap, const WaitForGraph& graph, const AttributionInput& in)
      : f_(f), snap_(snap), graph_(graph), in_(in), words_(snap, in) {
    first_ = in.now_unix_ms;
    for (const proto::Event& e : in.events) first_ = std::min(first_, e.unix_ms);
    for (const proto::Event& e : in.events) events_.push_back(&e);
    std::sort(events_.begin(), events_.end(),
              [](const proto::Event* a, const proto::Event* b) { return a->unix_ms < b->unix_ms; });
    hang_ = Start(proto::IncidentKind::kHang, "");
    crash_ = Start(proto::IncidentKind::kCrash, "");
    frozen_ = Start(proto::IncidentKind::kHostFrozen, "");
    busy_ = Start(proto::IncidentKind::kBusy, "");
    busy_.incident.decision = proto::DecisionKindName(proto::DecisionKind::kNone);
  }

  std::vector<proto::Incident> Write(std::string* why_none) {
    for (const RootFinding& root : f_.roots) Root(root);
    for (const AloneFinding& alone : f_.alone) Alone(alone);
    if (!crash_.incident.suspects.empty()) {
      Cascade();
      TeardownSetAside();
    }
    std::vector<Builder> transports;
    for (const TransportFinding& t : f_.transports) transports.push_back(Transport(t));
    Cycle();
    return Conclude(std::move(transports), why_none);
  }

 private:
  // An incident of `kind`, its id and times from the window's first event, opening with the
  // window's first events.
  Builder Start(proto::IncidentKind kind_of, const std::string& suffix) const {
    const char* kind = proto::IncidentKindName(kind_of);
    Builder b;
    b.max_evidence = std::max(1, in_.max_evidence);
    b.incident.kind = kind;
    b.incident.id = fmt::format("{}-{}{}", first_, kind, suffix);
    b.incident.first_event_unix_ms = first_;
    b.incident.decided_unix_ms = in_.now_unix_ms;
    b.incident.decide_ms = static_cast<double>(in_.now_unix_ms - first_);
    const size_t shown = std::min<size_t>(events_.size(), 3);
    for (size_t i = 0; i < shown; ++i) b.Evidence(EventLine(*events_[i]));
    if (events_.size() > shown) {
      b.Evidence(fmt::format("{} more events in the window", events_.size() - shown));
    }
    return b;
  }

  Builder& Into(RootKind kind) {
    switch (kind) {
      case RootKind::kCrash: return crash_;
      case RootKind::kFrozen: return frozen_;
      case RootKind::kBusy: return busy_;
      default: return hang_;
    }
  }

  static const char* Label(RootKind kind) {
    switch (kind) {
      case RootKind::kCrash: return "crash";
      case RootKind::kMissing: return "report missing";
      case RootKind::kFrozen: return "host frozen";
      case RootKind::kBusy: return "busy";
      case RootKind::kLagging: return "lagging";
      case RootKind::kComputeHang: return "compute hang";
      case RootKind::kHostHang: return "host hang";
    }
    return "";
  }

  void Root(const RootFinding& root) {
    const RankInfo& r = snap_.rank(root.rank);
    const Target& t = graph_.target(root.target);
    Builder& into = Into(root.kind);
    into.Suspect(r.rank, r.node, RootWhy(root, r, t), root.confidence);
    into.Evidence(fmt::format("{}, blocked by {}", words_.WaitLine(t), words_.RankName(root.rank)));
    if (r.blocks.size() > 1) {
      into.Evidence(fmt::format("{} blocks {} ops in all", words_.RankName(root.rank), r.blocks.size()));
    }
    into.summary.push_back(fmt::format("{}@{} ({})", r.rank, r.node, Label(root.kind)));
  }

  // Why a root is suspected: how it is stuck, in what, and who waits on it.
  std::string RootWhy(const RootFinding& root, const RankInfo& r, const Target& t) const {
    const std::string what = words_.Blocked(t);
    const std::string waiting = fmt::format("{} rank{} wait on it directly, {} in all", root.direct,
                                            root.direct == 1 ? "" : "s", root.total);
    std::string stale;
    if (r.progress != nullptr && r.stale) {
      stale = fmt::format("its report is {} old (limit {}), so this may be out of date; ",
                          HumanMs(r.report_age_ms), HumanMs(in_.stale_ms));
    }
    switch (root.kind) {
      case RootKind::kCrash: {
        std::string how = fmt::format("{} {}", ProcessOf(r),
                                      r.exit_event != nullptr ? ExitHow(*r.exit_event)
                                      : r.progress && proto::ProcessGone(r.progress->state) ? r.progress->state
                                                                                             : r.member->state);
        return fmt::format("{}{}; others wait on it in {}; {}", stale, how, what, waiting);
      }
      case RootKind::kMissing:
        return fmt::format("no progress report (its worker may be down, or it never started "
                           "monitoring); others wait on it in {}; {}", what, waiting);
      case RootKind::kFrozen:
        return fmt::format("{}host frozen: {}; others wait on it in {}{}; {}", stale, FrozenHow(*r.progress),
                           what, words_.Lag(r), waiting);
      case RootKind::kBusy:
        return fmt::format("{}busy on the host (last CUDA/NCCL call {} ago, cpu {:.0f}%), not "
                           "stuck: it has not reached {} yet; {}",
                           stale, HumanMs(r.progress->last_call_age_ms), r.progress->cpu_pct, what, waiting);
      case RootKind::kLagging:
        return fmt::format(
            "{}lagging: {}, so its host has stopped observing its GPU (a frozen process, or "
            "libft.so's poller stuck; heartbeat {}); others wait on it in {}; {}",
            stale, words_.Lag(r).substr(2),
            r.progress->heartbeat_age_ms >= 0 ? HumanMs(r.progress->heartbeat_age_ms) + " old"
                                               : std::string("unknown"),
            what, waiting);
      case RootKind::kComputeHang:
        return fmt::format(
            "{}compute hang: GPU stuck in its own work before {} (on comm {} its host entered "
            "#{} {} ago, its GPU started only #{}); {}",
            stale, what, CommHex(root.behind->comm_id), root.behind->entered_seq,
            HumanMs(root.behind->entered_age_ms), root.behind->started_seq, waiting);
      case RootKind::kHostHang:
        break;
    }
    return fmt::format(
        "{}host hang: never entered {} (nothing queued on its GPU; last CUDA/NCCL call {} "
        "ago, cpu {:.0f}%, in a synchronizing call: {}); {}",
        stale, what, HumanMs(r.progress->last_call_age_ms), r.progress->cpu_pct,
        r.progress->blocked_ms > 0 ? HumanMs(r.progress->blocked_ms) : std::string("no"), waiting);
  }

  void Alone(const AloneFinding& alone) {
    const RankInfo& r = snap_.rank(alone.rank);
    if (alone.crash) {
      crash_.Suspect(
          r.rank, r.node,
          fmt::format("{} {} while the job ran; no peer is "
                      "seen waiting on it inside NCCL (peers may wait outside it: a CPU collective, "
                      "a store barrier, a data loader; or be between collectives), and the job cannot "
                      "go on without it",
                      ProcessOf(r), ExitHow(*r.exit_event)),
          alone.confidence);
      crash_.EvidenceOnce(EventLine(*r.exit_event));
      crash_.summary.push_back(fmt::format("{}@{} (gone)", r.rank, r.node));
      return;
    }
    frozen_.Suspect(
        r.rank, r.node,
        fmt::format("host frozen: {}; frozen for {} when its worker raised the event; no peer is "
                    "seen waiting on it inside NCCL yet, but it cannot make progress and its peers "
                    "wait on it wherever they meet it next",
                    FrozenHow(*r.progress), HumanMs(r.frozen_event->age_ms)),
        alone.confidence);
    frozen_.EvidenceOnce(EventLine(*r.frozen_event));
    frozen_.summary.push_back(fmt::format("{}@{} (frozen)", r.rank, r.node));
  }

  // A cascade (one rank dies, the launcher or NCCL takes the rest down): which process ended
  // first and how, by the workers' own clocks (NTP keeps nodes within milliseconds; the events'
  // order in Redis is the order they were read, not the order they happened).
  void Cascade() {
    std::vector<const RankInfo*> deaths;
    for (const RankInfo& r : snap_.ranks()) {
      if (r.dead && !r.clean_exit && r.exit_event != nullptr) deaths.push_back(&r);
    }
    std::sort(deaths.begin(), deaths.end(), [](const RankInfo* a, const RankInfo* b) {
      return a->exit_event->unix_ms != b->exit_event->unix_ms ? a->exit_event->unix_ms < b->exit_event->unix_ms
                                                              : a->rank < b->rank;
    });
    if (deaths.size() <= 1) return;
    const int64_t t0 = deaths.front()->exit_event->unix_ms;
    std::string then;
    for (size_t i = 1; i < deaths.size() && i < 4; ++i) {
      then += fmt::format("{}{}@{} +{} ms", i == 1 ? "" : ", ", deaths[i]->rank, deaths[i]->node,
                          deaths[i]->exit_event->unix_ms - t0);
    }
    if (deaths.size() > 4) then += fmt::format(", and {} more", deaths.size() - 4);
    crash_.Evidence(fmt::format("first to fail (by the workers' clocks): rank {} on {}, {}; then {}",
                                deaths.front()->rank, deaths.front()->node, ExitHow(*deaths.front()->exit_event),
                                then));
  }

  // "5@node1 (signal 15)" per death set aside as a teardown.
  std::vector<std::string> TeardownEntries() const {
    std::vector<std::string> entries;
    for (int x : f_.teardown) {
      const RankInfo& r = snap_.rank(x);
      std::string how = r.asked_to_end
                            ? (r.exit_event != nullptr && r.exit_event->terminated_by_signal != 0
                                   ? fmt::format("signal {}", r.exit_event->terminated_by_signal)
                                   : std::string("stopped by its worker"))
                            : std::string("after a clean exit");
      entries.push_back(fmt::format("{}@{} ({})", r.rank, r.node, how));
    }
    return entries;
  }

  void TeardownSetAside() {
    if (f_.teardown.empty()) return;
    crash_.Evidence(fmt::format("not roots: {} ended after being told to (a launcher's teardown): {}",
                                f_.teardown.size(), Summarize(TeardownEntries())));
  }

  Builder Transport(const TransportFinding& f) const {
    const CommInfo& c = snap_.comm(f.comm);
    const std::string comm = CommHex(c.id);
    Builder b = Start(proto::IncidentKind::kTransportHang, "-" + comm);
    b.incident.comm_id = c.id;
    for (int ti : f.targets) {
      const Target& t = graph_.target(ti);
      if (t.p2p) {
        b.Evidence(fmt::format("{}; that peer's GPU is in the matching op toward it: neither "
                               "completes", words_.WaitLine(t)));
      } else if (t.completed == 0) {
        b.Evidence(fmt::format("all {} members started {} ({} ago), none completed it",
                               c.members.size(), words_.What(t), HumanMs(words_.StartedAgo(t))));
      } else {
        b.Evidence(fmt::format("all {} members started {} ({} ago); {} completed it while "
                               "others still wait (reports from different moments?)",
                               c.members.size(), words_.What(t), HumanMs(words_.StartedAgo(t)), t.completed));
      }
    }
    std::unordered_set<std::string_view> node_set;
    std::vector<std::string_view> nodes;
    for (int m : f.members) {
      const std::string& node = snap_.rank(m).node;
      if (node_set.insert(node).second) nodes.push_back(node);
    }
    const std::string where =
        nodes.size() == 1
            ? fmt::format("all on node {}: suspect that node's GPUs or intra-node links", nodes[0])
            : fmt::format("spanning {} nodes: suspect the network between them", nodes.size());
    for (int m : f.members) {
      const RankInfo& r = snap_.rank(m);
      b.Suspect(r.rank, r.node,
                f.pair ? fmt::format("in a p2p op on comm {} whose peer is in the matching op: "
                                     "neither completes ({})", comm, where)
                       : fmt::format("member of comm {}, whose op started on every member and "
                                     "completes on none ({})", comm, where),
                f.confidence);
    }
    b.incident.message = fmt::format("transport hang on comm {}: {} members {}; {} other rank{} on them", comm,
                                     f.members.size(), where, f.total, f.total == 1 ? " waits" : "s wait");
    return b;
  }

  // Waiters nothing explains: their blocking ranks are the hang's suspects, with little
  // confidence.
  void Cycle() {
    if (f_.unexplained == 0) return;
    for (int x : f_.cycle) {
      const RankInfo& r = snap_.rank(x);
      hang_.Suspect(r.rank, r.node,
                    "in a wait-for cycle: it waits on ranks that wait on it; the reports were "
                    "probably taken at different moments",
                    kConfCycle);
      hang_.summary.push_back(fmt::format("{}@{} (cycle)", r.rank, r.node));
    }
    hang_.Evidence(fmt::format("{} waiting ranks lead to no stuck rank{}", f_.unexplained,
                               f_.unknown_ops > 0 ? fmt::format("; {} ops wait on comm ranks no "
                                                                "membership names", f_.unknown_ops)
                                                  : std::string()));
    hang_.confidence = std::min(hang_.confidence, kConfCycle);
  }

  std::vector<proto::Incident> Conclude(std::vector<Builder> transports, std::string* why_none) {
    std::vector<proto::Incident> out;
    if (const size_t n = crash_.incident.suspects.size(); n > 0) {
      crash_.incident.message =
          crash_.WaitedOn()
              ? fmt::format("{} rank{} gone while others wait on {}: {}", n, n == 1 ? "" : "s",
                            n == 1 ? "it" : "them", Summarize(crash_.summary))
              : fmt::format("{} rank{} of the running job gone without a clean exit: {}", n,
                            n == 1 ? "" : "s", Summarize(crash_.summary));
      out.push_back(crash_.Finish());
    }
    if (const size_t n = frozen_.incident.suspects.size(); n > 0) {
      frozen_.incident.message =
          frozen_.WaitedOn()
              ? fmt::format("{} rank{} frozen (alive, but {} cannot run) while others wait on {}: {}",
                            n, n == 1 ? "" : "s", n == 1 ? "it" : "they", n == 1 ? "it" : "them",
                            Summarize(frozen_.summary))
              : fmt::format("{} rank{} frozen past FT_FROZEN_AFTER (alive, but {} cannot run): {}", n,
                            n == 1 ? "" : "s", n == 1 ? "it" : "they", Summarize(frozen_.summary));
      out.push_back(frozen_.Finish());
    }
    if (const size_t n = hang_.incident.suspects.size(); n > 0 || f_.unexplained > 0) {
      hang_.incident.message =
          n == 0 ? fmt::format("{} ranks wait but no stuck rank can be named", f_.unexplained)
                 : fmt::format("{} rank{} stuck, the job waits on {}: {}", n, n == 1 ? "" : "s",
                               n == 1 ? "it" : "them", Summarize(hang_.summary));
      out.push_back(hang_.Finish());
    }
    for (Builder& b : transports) out.push_back(b.Finish());
    if (const size_t n = busy_.incident.suspects.size(); n > 0) {
      busy_.incident.message = fmt::format("others wait on {} busy rank{} (not a hang; no action): {}", n,
                                           n == 1 ? "" : "s", Summarize(busy_.summary));
      out.push_back(busy_.Finish());
    }
    if (out.empty() && why_none != nullptr && !f_.teardown.empty()) {
      *why_none = fmt::format("{} rank{} ended after being told to or after a clean exit of the job "
                              "(a teardown, not a crash): {}",
                              f_.teardown.size(), f_.teardown.size() == 1 ? "" : "s", Summarize(TeardownEntries()));
    }
    return out;
  }

  const Findings& f_;
  const Snapshot& snap_;
  const WaitForGraph& graph_;
  const AttributionInput& in_;
  const Wording words_;
  int64_t first_ = 0;
  std::vector<const proto::Event*> events_;  // the window's events by time
  Builder hang_, crash_, frozen_, busy_;
};

}  // namespace

std::vector<proto::Incident> WriteIncidents(const Findings& findings, const Snapshot& snap,
                                            const WaitForGraph& graph, const AttributionInput& in,
                                            std::string* why_none) {
  return IncidentWriter(findings, snap, graph, in).Write(why_none);
}

}  // namespace ft::master::attribution

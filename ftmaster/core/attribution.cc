#include "ftmaster/core/attribution.h"

#include <algorithm>
#include <limits>

#include "ftmaster/core/attribution_classify.h"
#include "ftmaster/core/attribution_evidence.h"
#include "ftmaster/core/attribution_graph.h"
#include "ftmaster/core/attribution_snapshot.h"

namespace ft::master {

using attribution::CommInfo;
using attribution::RankInfo;
using attribution::Snapshot;

std::vector<proto::Incident> Attribute(const AttributionInput& in, std::string* why_none) {
  if (why_none != nullptr) why_none->clear();
  Snapshot snap(in);
  attribution::WaitForGraph graph(snap, in);
  const attribution::Findings findings = attribution::Classify(snap, graph, in);
  return attribution::WriteIncidents(findings, snap, graph, in, why_none);
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

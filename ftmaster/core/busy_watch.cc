#include "ftmaster/core/busy_watch.h"

#include <cmath>

namespace ft::master {

uint64_t EnteredOps(const proto::RankProgress& p) {
  uint64_t entered = 0;
  for (const proto::CommRow& row : p.comms) entered += row.entered_seq;
  return entered;
}

int64_t LastEnteredUnixMs(const proto::RankProgress& p) {
  double youngest = -1;
  for (const proto::CommRow& row : p.comms) {
    if (row.entered_age_ms < 0) continue;
    if (youngest < 0 || row.entered_age_ms < youngest) youngest = row.entered_age_ms;
  }
  if (youngest < 0) return -1;
  return p.observed_unix_ms - static_cast<int64_t>(std::ceil(youngest));
}

namespace {

bool ReachedWaitedCollectives(const proto::RankProgress& p, const std::vector<proto::Event>& window_events) {
  for (const proto::Event& e : window_events) {
    if (!proto::Is(e, proto::EventKind::kTimeout) || e.comm_id == 0 || e.seq == 0) continue;
    if (e.op == proto::OpKind::kSend || e.op == proto::OpKind::kRecv) continue;
    // A collective is the same #seq on every member.
    for (const proto::CommRow& row : p.comms) {
      if (row.comm_id == e.comm_id && !row.p2p && row.entered_seq < e.seq) return false;
    }
  }
  return true;
}

}  // namespace

std::string_view WhyNotBack(const proto::RankProgress& now, const BusyWatchStart& start,
                            const std::vector<proto::Event>& window_events) {
  if (now.frozen) return "frozen";
  if (EnteredOps(now) <= start.entered_ops) return "no op entered since the watch began";
  // The entry's age is rounded up: an op entered in the watch's first millisecond counts
  // later, never one entered before it.
  if (LastEnteredUnixMs(now) <= start.since_unix_ms) return "its newest op was entered before the watch began";
  if (!ReachedWaitedCollectives(now, window_events)) return "not yet in the collectives its peers wait in";
  return "";
}

}  // namespace ft::master

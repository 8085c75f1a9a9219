// ft::master::GoneNodes: the nodes whose copies no one can read any more although nobody
// evicted them — a node lost with its memory: a preempted spot node that never comes back, a
// machine that died between launches. The restore plan treats such a node as an evicted node
// whose worker is gone (only its remote-tier copies count), so that a relaunch on a
// replacement gets the newest step it can really restore, or `step none` and why, instead of a
// plan naming copies no one can reach (its ranks there failed their restore, every relaunch).
//
// A node counts as gone once its worker, seen alive before, has had no heartbeat for
// kGoneAfterMs in a row: twice the heartbeat's TTL, so a worker that restarts, or a Redis that
// lost its keys and is written again, never counts. Seen alive: a heartbeat this master read,
// ranks it registered, or a copy it reported that the plan names (a master that took over
// after the node died knows it from those). A node never seen at all (a worker not started
// yet) is not judged. The price: with every worker of the plan's nodes down for longer than
// the wait (a whole cluster restarted, the master first), the plan counts their copies lost
// until their heartbeats return, and a relaunch in that gap restores less. (Its ranks' membership says nothing here: a node lost with its
// worker leaves its ranks "running" in the membership for good. A node whose ranks still train
// without a worker has no one to serve its copies or hand its ranks a plan either.) It is back
// as soon as its heartbeat is. Pure: the master's checkpoint round (ckpt_round.h) reads the
// heartbeats and hands in what it saw, with its clock.
#ifndef FT_FTMASTER_CORE_GONE_NODES_H_
#define FT_FTMASTER_CORE_GONE_NODES_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace ft::master {

class GoneNodes {
 public:
  static constexpr int64_t kGoneAfterMs = 10000;

  // One look at the nodes that matter (those the plan names, and those gone) and whether each
  // one's worker heartbeat is alive: a node not among them is forgotten. True when the set of
  // gone nodes changed.
  bool Observe(const std::map<std::string, bool>& heartbeat, int64_t now_ms);
  // The node's worker was seen at work otherwise (it registered ranks of the job, or reported
  // a copy the plan names): it may be judged from now on, even if no heartbeat of it was read
  // yet.
  void SawAlive(const std::string& node) { beat_seen_.insert(node); }
  const std::set<std::string>& gone() const { return gone_; }

 private:
  std::set<std::string> beat_seen_;               // a heartbeat seen alive once
  std::map<std::string, int64_t> missing_since_;  // no heartbeat since
  std::set<std::string> gone_;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_GONE_NODES_H_

// ft::master::CordonRound: the cluster-wide cordons (ft:cordon, written by `ftmaster nodes
// --cordon`; docs/nodes.md) in this job's eviction list. Every kPeriod the leading master reads
// the cordons and, in one fenced write, adds each cordoned node in force to ft:{J}:evicted with
// `evicted_why:<node>` = "cordoned: <reason>" (what a scheduler's drain takes as its reason),
// and takes back out a node it put there for a cordon that was lifted or lapsed. A node evicted
// for anything else stays as it is. A garbled cordon is reported once and skipped; a failed read
// or write is logged once and tried again at the next period: nothing else of the loop waits.
// Single-threaded, owned by MasterLoop.
#ifndef FT_FTMASTER_CORDON_ROUND_H_
#define FT_FTMASTER_CORDON_ROUND_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ftmaster/loop_context.h"
#include "proto/node_history.h"

namespace ft::master {

// The reason a cordon gives its node in a job's eviction list starts with this.
inline constexpr std::string_view kCordonedWhy = "cordoned: ";

// The cordons of a reply to HGETALL ft:cordon (field = node, value = CordonEntry), by node: a
// value that does not decode or names another node than its field is reported to `bad` and
// left out (*garbled counts them).
std::map<std::string, proto::CordonEntry> ParseCordons(const redis::Reply& reply, BadValues* bad, size_t* garbled);

class CordonRound {
 public:
  using Clock = LoopContext::Clock;
  static constexpr std::chrono::milliseconds kPeriod{2000};

  explicit CordonRound(LoopContext* ctx) : ctx_(ctx) {}
  void NewTerm(Clock::time_point now) { next_ = now; }
  bool Due(Clock::time_point now) const { return now >= next_; }
  void Run(Clock::time_point now, int64_t unix_ms);

 private:
  LoopContext* ctx_;
  Clock::time_point next_{};
  bool warned_ = false;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_CORDON_ROUND_H_

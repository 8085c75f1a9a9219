// ft::master::JobMembership: the ranks' membership (ft:{J}:ranks) as the master last read it,
// and the topology over it — explicit (--topology) or inferred from the membership. Every job
// of the loop reads it (the window's members, the decision's save targets, the plan's nodes,
// the stragglers' ranks); only this class reads the hash and writes `inferred_topology`.
//   - Read: one HSCAN chunk per call (131k members are ~40 MB: one HGETALL would hold the loop,
//     and the lease, for seconds), skipped while ranks:version has not moved; each completed
//     read (or version check) runs the loop's after-read step (OnRead), which says what the
//     membership means for the other jobs.
//   - CurrentTopology: inferred again only when the membership moved; one inferred while the
//     ranks ran is kept (`inferred_topology` in the master hash) once they have left.
// Single-threaded, owned by MasterLoop; the membership survives a new term (re-read by version).
#ifndef FT_FTMASTER_JOB_MEMBERSHIP_H_
#define FT_FTMASTER_JOB_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "ftmaster/core/topology.h"
#include "ftmaster/loop_context.h"
#include "ftmaster/store.h"

namespace ft::master {

// Rank, node and incarnation of each member (not its communicators: at 131k ranks those are tens
// of MB): which processes an action is for (action_runner.h, DecidedFor).
std::vector<proto::Membership> SlimMembers(std::span<const proto::Membership> members);

class JobMembership {
 public:
  using Clock = LoopContext::Clock;

  explicit JobMembership(LoopContext* ctx) : ctx_(ctx) {}

  // Parses an explicit topology (an error names the bad part).
  Status Init();
  // Called after every completed read or version check (the loop's OnRanksRead).
  void OnRead(std::function<void()> after_read) { after_read_ = std::move(after_read); }

  // A new term: a pass under way is dropped, the next read is due now. The members stay.
  void NewTerm(Clock::time_point now);
  // From the master hash: the explicit topology published for `ftmaster status`, or the one
  // inferred while the ranks ran. False when a write failed (the term is loaded again).
  bool LoadTerm(const MasterHash& state);

  bool Due(Clock::time_point now) const { return now >= next_read_; }
  void ReadSoon(Clock::time_point now) { next_read_ = now; }
  // One step of the membership read. `window_open`: an incident window waits for it, so the
  // next one comes a tick later instead of a ranks_period. False when Redis failed.
  bool Read(Clock::time_point now, bool window_open);

  const Topology& CurrentTopology();
  bool has_explicit() const { return have_explicit_; }
  // Read once at least, and not empty: the window can find its communicators' members.
  bool known() const { return loaded_ && !ranks_.empty(); }
  // Read once at least (empty or not).
  bool loaded() const { return loaded_; }
  const std::vector<proto::Membership>& values() const { return ranks_.values(); }
  uint64_t version() const { return ranks_.version(); }  // moves with every change of values()

 private:
  LoopContext* ctx_;
  std::function<void()> after_read_;
  DecodedHash<proto::Membership> ranks_{"ranks"};
  bool loaded_ = false;              // read once (kept across terms, by version)
  std::string version_read_;         // ranks:version at that read ("" none)
  std::string cursor_;               // HSCAN cursor of the pass under way ("": none open)
  std::string pass_version_;         // ranks:version when that pass began
  Clock::time_point next_read_{};

  Topology explicit_topology_;
  bool have_explicit_ = false;
  std::optional<Topology> inferred_;
  uint64_t inferred_for_ = 0;        // the version() it was inferred from
  // The last topology inferred while the ranks ran (`inferred_topology` in the master hash):
  // kept once they have left (Topology::InferOrKeep).
  std::optional<Topology> last_inferred_;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_JOB_MEMBERSHIP_H_

// The just-in-time checkpoint decision after a hang or crash. Pure logic: incidents and the
// topology in, what to command out; the caller sends the commands, waits for acks up to
// save_deadline, then stops the job and adds evict_nodes to the eviction set.
//
// Rules:
//   - Only "hang", "host-frozen", "crash" and "transport-hang" incidents call for a decision; with none of
//     them (busy, straggler only) the decision is "none".
//   - Unhealthy ranks: every suspect of those incidents, plus every rank membership shows
//     "dead", "exited" or "disabled" (no agent to save), plus, when membership is given, every
//     rank it does not list.
//   - Topology unknown, or a suspect rank outside it: "stop".
//   - Alive suspects: suspects of "hang" incidents only (a compute or host hang: the app's
//     stream or thread is stuck) whose membership state can save (not dead, exited, stopped,
//     disabled; no membership: not alive). Their libft.so agent thread and the GPU's copy
//     engines are free, so they can copy their own state; a copy the stuck work made torn
//     (the update had begun) is never restored. Suspects of host-frozen, crash and
//     transport-hang incidents never save.
//   - Replicated optimizer (sharded_optimizer false): a full checkpoint exists when every model
//     shard (tp, pp) has at least one healthy DP replica, or else alive suspects. Every healthy
//     DP replica of every shard saves, so that their digests can be compared (ckpt_verify.h: a
//     replica whose bytes differ from its peers' is silent data corruption, and two that
//     disagree make the step untrusted); alive suspects save only for a shard without a
//     healthy replica, and are left out otherwise (both said in the reason).
//   - Sharded optimizer: every DP rank of every shard holds its own slice of the optimizer
//     state and must save it: healthy ranks and alive suspects. One that can do neither
//     (frozen, dead, not in membership) means "stop": no full checkpoint of this moment, and
//     the restore plan keeps the newest step every shard has.
//   - Otherwise "save-then-stop" with those ranks, or "stop" naming the first shard (or rank)
//     that cannot be saved.
//   - Evict (EvictedNodes in decision.cc), with a reason per node: the nodes of hang suspects.
//     A crash or a stopped process evicts its node only with evidence against the node: a
//     critical hardware signal there in the incident's hardware (hw_evidence.h: an Xid of the
//     GPU's, uncorrectable ECC, a link down, an MCE), every rank of the node stopped (a frozen
//     host), or an earlier crash or stop there within the hour (repeated failures); without it the failure is the software's: the job restarts in place and the node
//     stays schedulable (the seed systems do the same). A transport hang evicts its node when
//     all of the comm's members share one node (the fault is inside it: GPUs, NVLink/NVSwitch);
//     across nodes, the nodes whose NIC port reported a link failure (the link named), and
//     none when no port did or every node's did: evicting every node of the comm would take
//     healthy nodes out; the incident names them for a person to check.
#ifndef FT_FTMASTER_DECISION_H_
#define FT_FTMASTER_DECISION_H_

#include <map>
#include <span>
#include <string>
#include <vector>

#include "ftmaster/core/topology.h"
#include "proto/master_codec.h"
#include "proto/messages.h"

namespace ft::master {

// {rank, node (from membership; empty when unknown)}: also part of the persisted action.
using SaveTarget = proto::SaveTarget;

// A decision as persisted and carried out (`action` in the master hash; proto/master_codec.h):
// what DecideWindow (window_decision.h) decides and the action runner executes.
using Action = proto::MasterAction;

struct Decision {
  proto::DecisionKind decision = proto::DecisionKind::kNone;
  std::vector<SaveTarget> save;      // by rank; empty unless save-then-stop
  std::vector<std::string> evict_nodes;  // sorted
  std::vector<std::string> evict_reasons;  // one per evict_nodes, for the scheduler's drain reason
  std::string reason;                // for people, one line
};

// The incident kinds that stop the job (a stuck, frozen or dead rank, a hung transport); the
// others (busy, straggler, sdc) are reported and watched.
bool Acted(const proto::Incident& incident);

// `prior_failures`: per node, the crashes and stopped processes it had within the last
// kRepeatedFailureMs before these incidents (the master keeps them: `failures:<node>`). One
// more with no hardware evidence is a repeated failure: evidence against the node.
inline constexpr int64_t kRepeatedFailureMs = 60 * 60 * 1000;
Decision Decide(std::span<const proto::Incident> incidents, const Topology& topology,
                std::span<const proto::Membership> membership, bool sharded_optimizer,
                const std::map<std::string, int>* prior_failures = nullptr);

// Writes the decision into the incidents it covers (hang, crash, transport-hang): `decision`,
// and the reason appended to `message`. Busy and straggler incidents keep "none".
void ApplyDecision(const Decision& decision, std::span<proto::Incident> incidents);

}  // namespace ft::master

#endif  // FT_FTMASTER_DECISION_H_

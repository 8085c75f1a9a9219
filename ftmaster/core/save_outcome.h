// ft::master::SaveOutcome: what a just-in-time save achieved, counted from the save targets,
// their acknowledgements and the verification of the copies they reported, so an incident
// never reads "saved" when nothing was. Every healthy DP replica of a shard is a target
// (decision.h); a shard is saved when one of its replicas answered "done", and verified when
// the cross-replica check (ckpt_verify.h) accepted its digest. Rank answers other than "done":
// "not_supported" (a libft.so without checkpoints), "nothing_registered" (the application
// never called ft_register), "failed", no node known for the rank (no membership), no answer
// by the deadline. Pure logic; the master loop records and prints it.
#ifndef FT_FTMASTER_SAVE_OUTCOME_H_
#define FT_FTMASTER_SAVE_OUTCOME_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "ftmaster/core/ckpt_verify.h"
#include "ftmaster/core/decision.h"

namespace ft::master {

struct SaveOutcome {
  int shards = 0;              // model shards the targets cover
  int saved = 0;               // shards with a replica that answered "done"
  int verified = 0;            // shards the verification accepted (0 until verified)
  int64_t step = -1;           // the step the ranks saved (-1: none known)
  std::optional<proto::VerdictState> verdict;  // that step's verdict state (none: not judged)
  int ranks = 0;               // save targets (ranks asked)
  int done = 0;                // ranks that answered "done"
  int not_supported = 0;       // ranks
  int nothing_registered = 0;  // ranks
  int failed = 0;              // ranks that answered anything else
  int unreachable = 0;         // ranks with no node known: never asked
  int unanswered = 0;          // ranks asked, no answer by the deadline
  bool operator==(const SaveOutcome&) const = default;
};

// `results`: the ack result per rank, for the targets that answered. `shard_of(rank)`: the
// shard a target saves (ShardOfRank); empty: every target is its own shard.
SaveOutcome CountSaveOutcome(std::span<const SaveTarget> targets, const std::map<int, std::string>& results,
                             const std::function<ShardId(int)>& shard_of = {});

// Adds what the verification of `step` found.
void AddVerification(const StepJudgement& judged, SaveOutcome* outcome);

// What a save achieved, one code per ending of DescribeSaveOutcome's line (the words are for
// people; programs and tests compare this). Derived from the counts, so never stored apart.
enum class SaveConclusion : uint8_t {
  kNoCheckpoint,       // no shard saved: the job is stopped without a checkpoint
  kNothingRegistered,  // no shard saved, and every rank asked answered nothing_registered (or not at all)
  kIncomplete,         // some shards saved, not all: restore from an earlier checkpoint
  kVerified,           // every shard saved and the step verified
  kComplete,           // every shard saved, no verdict (yet)
  kNotVerified,        // every shard saved, the step's verdict is not "verified"
};
const char* SaveConclusionName(SaveConclusion conclusion);
SaveConclusion Conclude(const SaveOutcome& outcome);

// One line for people: "saved 4 of 4 shards (7 ranks answered done), verified 4 at step 120;
// the checkpoint is complete", "saved 0 of 4 shards (...); the job is stopped without a
// checkpoint: nothing is registered — call ft_register".
std::string DescribeSaveOutcome(const SaveOutcome& outcome);

// What took a step's copies (CkptCopy.origin: "periodic", "just-in-time", "termination"; ""
// from an older worker is "unknown") and how many each, for the plan's log line and
// `ftmaster incidents`/`checkpoints`: "termination 2, just-in-time 1" (most first).
std::map<std::string, int> CountOrigins(std::span<const proto::CkptCopy> copies);
std::string FormatOrigins(const std::map<std::string, int>& origins);

// The JSON kept in ft:{J}:master as `checkpoint` and `checkpoint:<incident>`
// (docs/redis-schema.md); Decode reads it back (for `ftmaster incidents`).
std::string EncodeSaveOutcome(const std::string& incident, const SaveOutcome& outcome);
bool DecodeSaveOutcome(std::string_view json, SaveOutcome* outcome);

}  // namespace ft::master

#endif  // FT_FTMASTER_SAVE_OUTCOME_H_

// ft::master::SaveOutcome: what a just-in-time save achieved, counted from the save targets
// and their acknowledgements, so an incident never reads "saved" when nothing was. A target
// is saved only when its rank answered "done"; "not_supported" (a libft.so without
// checkpoints), "failed", no node known for the rank (no membership), and no answer by the
// deadline all count as not saved. Pure logic; the master loop records and prints it.
#ifndef FT_FTMASTER_SAVE_OUTCOME_H_
#define FT_FTMASTER_SAVE_OUTCOME_H_

#include <map>
#include <span>
#include <string>

#include "ftmaster/decision.h"

namespace ft::master {

struct SaveOutcome {
  int shards = 0;         // save targets: one per model shard (all DP ranks when sharded)
  int saved = 0;          // answered "done"
  int not_supported = 0;  // answered "not_supported"
  int failed = 0;         // answered anything else
  int unreachable = 0;    // no node known: never asked
  int unanswered = 0;     // asked, no answer by the deadline
};

// `results`: the ack result per rank, for the targets that answered.
SaveOutcome CountSaveOutcome(std::span<const SaveTarget> targets, const std::map<int, std::string>& results);

// One line for people: "saved 0 of 4 shards (4 answered not_supported); the job is stopped
// without a checkpoint".
std::string DescribeSaveOutcome(const SaveOutcome& outcome);

// The JSON kept in ft:{J}:master as `checkpoint` (docs/redis-schema.md).
std::string EncodeSaveOutcome(const std::string& incident, const SaveOutcome& outcome);

}  // namespace ft::master

#endif  // FT_FTMASTER_SAVE_OUTCOME_H_

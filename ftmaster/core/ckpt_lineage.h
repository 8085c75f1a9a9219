// Which checkpoint copies belong to the run the job continues. A job's step numbers are not
// unique in time: a relaunch that restored step 30 trains steps 31, 32, ... again, and a job
// that finished and is launched again trains from step 0. A copy of step 35 saved before such a
// relaunch is of the run the job left: its bytes differ from the step 35 the job will reach, and
// planning it (or judging it beside the new run's copies) restores a state the job never had.
//
// The master records each such point as a rewind (proto::CkptRewind: the step the job went back
// to, -1 for a start from scratch, and when). A copy is superseded when some rewind went back
// below its step after the copy was saved:
//     superseded(copy) = exists rewind w: copy.step > w.step && saved(copy) < w.unix_ms
// A finish is a rewind to -1 when the job ended past its last checkpoint (ckpt_round.h says
// when): what ft holds is then an older state than the run reached.
// Times are CLOCK_REALTIME of the ranks' nodes (a copy's save, a process's start); the rule needs
// them ordered only across a relaunch (old copies saved before the old processes ended, which is
// before the new ones started), seconds against the milliseconds NTP keeps nodes apart.
#ifndef FT_FTMASTER_CORE_CKPT_LINEAGE_H_
#define FT_FTMASTER_CORE_CKPT_LINEAGE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "proto/ckpt_codec.h"

namespace ft::master {

// When the copy was saved: saved_unix_ms, else (a worker from before it) unix_ms, which is
// later (the report), so an old worker's copy is superseded only by later rewinds.
int64_t SavedUnixMs(const proto::CkptCopy& copy);

// The first rewind that supersedes `copy`, or nullptr.
const proto::CkptRewind* SupersededBy(const proto::CkptCopy& copy, std::span<const proto::CkptRewind> rewinds);

// Adds `rewind` to `rewinds` (oldest first; past proto::kMaxCkptRewinds the oldest goes). False,
// and nothing added, when a rewind already there supersedes everything it would (one that went
// back as far or further, as late or later).
bool AddRewind(std::vector<proto::CkptRewind>* rewinds, proto::CkptRewind rewind);

}  // namespace ft::master

#endif  // FT_FTMASTER_CORE_CKPT_LINEAGE_H_

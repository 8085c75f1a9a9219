// How `ftmaster checkpoints` shows what the workers of replacement nodes prefetched
// (ft:{J}:prefetch, node -> PrefetchReport, proto/prefetch_codec.h): one line per node for
// people, plus one per rank that failed. Pure formatting; the CLI reads the hash.
#ifndef FT_FTMASTER_PREFETCH_VIEW_H_
#define FT_FTMASTER_PREFETCH_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/prefetch_codec.h"

namespace ft::master {

// `reports` by node; `planned_step`: the restore plan's step (-1 none): a report of another
// step is said to be stale. `now_unix_ms`: for how long a running prefetch has run. Empty
// when there are no reports.
std::string PrefetchText(const std::vector<proto::PrefetchReport>& reports, int64_t planned_step,
                         int64_t now_unix_ms);

}  // namespace ft::master

#endif  // FT_FTMASTER_PREFETCH_VIEW_H_

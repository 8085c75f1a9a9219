// FT_NODE_RANKS, the ranks a scheduler will start on this node: parsed once by the daemon,
// printed in the prefetcher's logs. Pure functions.
#ifndef FT_FTWORKER_PREFETCH_NODE_RANKS_H_
#define FT_FTWORKER_PREFETCH_NODE_RANKS_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::worker {

// "4-7", "4,5,6,7", "0-3,8": sorted, each rank once. InvalidArgument naming the bad part.
// Empty text: no ranks.
Status ParseNodeRanks(std::string_view text, std::vector<int>* out);
// The other way (logs): proto::RankRanges::Of(ranks).Format(), "4-7", "0-3,8". The parse here
// stays lenient (any order, repeats: a person writes it); RankRanges::Parse is the strict one
// for what ft writes itself.

}  // namespace ft::worker

#endif  // FT_FTWORKER_PREFETCH_NODE_RANKS_H_

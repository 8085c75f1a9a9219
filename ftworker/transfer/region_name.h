// The names under which a worker serves its node's checkpoint copies to peers
// (transfer_engine/transfer.h RegionProvider::Open), and which a pulling worker asks for:
//
//   arena/<step>/<rank>   the rank's committed copy of <step> in its host arena (memory)
//   local/<step>/<rank>   that copy in the node's local tier (FT_CKPT_DIR, a disk)
//   replica/<step>/<rank> this node's buddy copy of another node's rank (ftworker/prefetch/replicator.h)
//
// <step> and <rank> are plain decimals (no sign, no leading zero, no spaces): a name is
// foreign bytes from the network and is parsed strictly, so one copy has exactly one name.
#ifndef FT_FTWORKER_REGION_NAME_H_
#define FT_FTWORKER_REGION_NAME_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ft::worker {

enum class CopyPlace { kArena, kLocal, kReplica };
const char* CopyPlaceName(CopyPlace place);  // "arena", "local", "replica"

struct RegionName {
  CopyPlace place = CopyPlace::kArena;
  int64_t step = -1;
  int rank = -1;
  bool operator==(const RegionName&) const = default;
};

std::string FormatRegionName(CopyPlace place, int64_t step, int rank);
// InvalidArgument, quoting (a bounded prefix of) the name, for anything FormatRegionName
// would not produce. *out is untouched on error.
Status ParseRegionName(std::string_view name, RegionName* out);

}  // namespace ft::worker

#endif  // FT_FTWORKER_REGION_NAME_H_

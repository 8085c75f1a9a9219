// Failures libft.so swallowed to stay fail-open (an exception in a hook, a real function it
// could not find, its poller giving up), counted by place in the segment header
// (SegmentHeader::hook_failures) so a person or the worker can see that monitoring has a hole
// and where. The place ids below are part of the segment contract (docs/shm-format.md): never
// renumber one; add new ones at the end.
#ifndef FT_SHM_HOOK_FAILURES_H_
#define FT_SHM_HOOK_FAILURES_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "shm/layout.h"

namespace ft::shm {

enum class HookPlace : uint32_t {
  kPoller = 1,            // the poller thread stopped on an exception; libft.so turned itself off
  kMissingSymbol = 2,     // a wrapper found no real function in any loaded object
  kResolve = 3,           // looking up real functions failed
  kNcclPreOp = 4,
  kNcclPostOp = 5,
  kNcclGroupEndPre = 6,
  kNcclGroupEndPost = 7,
  kNcclInitPost = 8,
  kNcclInitAllPost = 9,
  kNcclNextOrdinal = 10,
  kNcclSplitPost = 11,
  kNcclShrinkPost = 12,
  kCudaGraphPre = 13,
  kCudaGraphPost = 14,
  kCudaAllocPost = 15,
  kCudaFreePost = 16,
  kKernelLaunchPre = 17,   // a sampled kernel launch (FT_KERNEL_SAMPLE)
  kKernelLaunchPost = 18,
};
inline constexpr uint32_t kHookPlaceOverflow = 0xffffffffu;  // no slot was free

// "nccl_pre_op", ...; "overflow"; nullptr for an id this build does not know.
const char* HookPlaceName(uint32_t place);
std::optional<HookPlace> HookPlaceFromName(std::string_view name);

// Lock-free; any thread of the process. Never fails.
void CountHookFailure(SegmentHeader* header, uint32_t place);

struct HookFailureCount {
  uint32_t place = 0;
  uint64_t count = 0;
};
// The places with a count, in slot order.
std::vector<HookFailureCount> SnapshotHookFailures(const SegmentHeader* header);

}  // namespace ft::shm

#endif  // FT_SHM_HOOK_FAILURES_H_

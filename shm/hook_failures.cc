#include "shm/hook_failures.h"

#include "common/names.h"

namespace ft::shm {
namespace {

constexpr Named<HookPlace> kHookPlaceNames[] = {
    {HookPlace::kPoller, "poller"},
    {HookPlace::kMissingSymbol, "missing_symbol"},
    {HookPlace::kResolve, "resolve"},
    {HookPlace::kNcclPreOp, "nccl_pre_op"},
    {HookPlace::kNcclPostOp, "nccl_post_op"},
    {HookPlace::kNcclGroupEndPre, "nccl_group_end_pre"},
    {HookPlace::kNcclGroupEndPost, "nccl_group_end_post"},
    {HookPlace::kNcclInitPost, "nccl_init_post"},
    {HookPlace::kNcclInitAllPost, "nccl_init_all_post"},
    {HookPlace::kNcclNextOrdinal, "nccl_next_ordinal"},
    {HookPlace::kNcclSplitPost, "nccl_split_post"},
    {HookPlace::kNcclShrinkPost, "nccl_shrink_post"},
    {HookPlace::kCudaGraphPre, "cuda_graph_pre"},
    {HookPlace::kCudaGraphPost, "cuda_graph_post"},
    {HookPlace::kCudaAllocPost, "cuda_alloc_post"},
    {HookPlace::kCudaFreePost, "cuda_free_post"},
    {HookPlace::kKernelLaunchPre, "kernel_launch_pre"},
    {HookPlace::kKernelLaunchPost, "kernel_launch_post"},
};
static_assert(NamesAreUnique(kHookPlaceNames));

}  // namespace

const char* HookPlaceName(uint32_t place) {
  if (place == kHookPlaceOverflow) return "overflow";
  return NameIn(kHookPlaceNames, static_cast<HookPlace>(place), nullptr);
}

std::optional<HookPlace> HookPlaceFromName(std::string_view name) {
  return ParseIn(kHookPlaceNames, name);
}

void CountHookFailure(SegmentHeader* header, uint32_t place) {
  if (header == nullptr || place == 0) return;
  HookFailureSlot* slots = header->hook_failures;
  for (uint32_t i = 0; i + 1 < kHookFailureSlots; ++i) {
    uint32_t seen = slots[i].place.load(std::memory_order_acquire);
    if (seen == 0 && slots[i].place.compare_exchange_strong(seen, place, std::memory_order_acq_rel)) {
      seen = place;
    }
    if (seen == place) {
      slots[i].count.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  HookFailureSlot& last = slots[kHookFailureSlots - 1];
  last.place.store(kHookPlaceOverflow, std::memory_order_release);
  last.count.fetch_add(1, std::memory_order_relaxed);
}

std::vector<HookFailureCount> SnapshotHookFailures(const SegmentHeader* header) {
  std::vector<HookFailureCount> out;
  // Version 1 had no counters: those bytes are reserved, not ours to read (shm/layout_v1.h).
  if (header->layout_version < 2) return out;
  for (const HookFailureSlot& slot : header->hook_failures) {
    uint32_t place = slot.place.load(std::memory_order_acquire);
    uint64_t count = slot.count.load(std::memory_order_relaxed);
    if (place != 0 && count != 0) out.push_back({place, count});
  }
  return out;
}

}  // namespace ft::shm

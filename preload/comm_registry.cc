#include "preload/comm_registry.h"

#include <unistd.h>

#include "common/log.h"
#include "preload/real.h"
#include "shm/records.h"

namespace ft::preload::internal {

namespace {


// The last comm this thread looked up, valid while Runtime::comms_epoch has not moved (no
// comm registered or ended since): a thread issuing op after op on one comm takes no lock.
// constinit: no TLS init wrapper (see t_group_depth).
struct LookupCache {
  ncclComm_t handle = nullptr;
  CommInfo* info = nullptr;
  uint64_t epoch = 0;
};
constinit thread_local LookupCache t_lookup{};

constexpr uintptr_t kCellEmpty = 0, kCellEnded = 1, kCellFilling = 2;
std::atomic<uint64_t> g_live_comms{0};  // cells holding a live handle

bool HasRoom() { return g_live_comms.load(std::memory_order_relaxed) < kCommCells; }

CommCell* CellOf(ncclComm_t handle, bool claim) {
  uintptr_t key = reinterpret_cast<uintptr_t>(handle);
  for (uint64_t i = 0, at = MixId(key); i < kCommCells; ++i, ++at) {
    CommCell& cell = g_rt->comms[at % kCommCells];
    uintptr_t seen = cell.key.load(std::memory_order_acquire);
    if (seen == key) return &cell;
    if (claim && (seen == kCellEmpty || seen == kCellEnded) &&
        cell.key.compare_exchange_strong(seen, kCellFilling, std::memory_order_acq_rel)) {
      return &cell;
    }
    if (seen == kCellEmpty) {
      if (!claim) return nullptr;
      --i, --at;  // lost the race for this cell: look at it again
    }
  }
  return nullptr;
}

// Too many live communicators for the table: ops on the others share this one (untracked in
// the in-flight table), rather than registering anew at every op.
CommInfo* Overflow() {
  static CommInfo* overflow = [] {
    auto* info = new CommInfo;
    info->id = MixId(0x6f766572666c6f77ull);  // "overflow"
    info->slot_claimed = true;
    return info;
  }();
  return overflow;
}

}  // namespace

CommInfo* Register(ncclComm_t handle, uint64_t id, int rank, int size, CommOrigin origin,
                   uint64_t parent_id, uint32_t ordinal, int color) {
  auto* info = new CommInfo;  // outside any lock
  info->id = id;
  info->rank = rank;
  info->size = size;
  // A nonblocking split/shrink does not know its rank yet: its slot is claimed at its first
  // op, when it does (the slot's identity fields are written once).
  if (rank >= 0) {
    SpinGuard guard(g_rt->comms_lock);
    auto claimed = g_rt->table->Claim(id, rank, size, g_rt->identity.rank);
    info->slot = claimed ? *claimed : kNoSlot;
    info->slot_claimed = true;
  }
  CommInfo* head = g_rt->all_comms.load(std::memory_order_relaxed);
  do {
    info->all_next = head;
  } while (!g_rt->all_comms.compare_exchange_weak(head, info, std::memory_order_release,
                                                   std::memory_order_relaxed));
  if (CommCell* cell = CellOf(handle, true)) {
    if (cell->key.load(std::memory_order_relaxed) == kCellFilling) {
      g_live_comms.fetch_add(1, std::memory_order_relaxed);
    }
    cell->info.store(info, std::memory_order_release);  // a reused handle replaces an ended comm
    cell->key.store(reinterpret_cast<uintptr_t>(handle), std::memory_order_release);
  } else {
    FT_LOG(Warn, Preload, "more than {} live communicators: comm {:016x} is not tracked", kCommCells, id);
  }
  g_rt->comms_epoch.fetch_add(1, std::memory_order_release);
  auto r = MakeRecord(RecordType::kCommInit, static_cast<uint16_t>(origin), info->slot, id, 0, NowNs());
  r.a = shm::CommRankWord(rank, size);
  r.b = static_cast<uint64_t>(static_cast<int64_t>(g_rt->identity.rank));
  r.c = parent_id;
  r.d = shm::CommParentWord(ordinal, color);
  Push(r);
  FT_LOG(Debug, Preload, "comm {:016x} rank {}/{} (origin {})", id, rank, size,
         static_cast<int>(origin));
  return info;
}

CommInfo* FindComm(ncclComm_t handle) {
  CommCell* cell = CellOf(handle, false);
  return cell != nullptr ? cell->info.load(std::memory_order_acquire) : nullptr;
}

CommInfo* UnregisterComm(ncclComm_t handle) {
  CommCell* cell = CellOf(handle, false);
  if (cell == nullptr) return nullptr;
  CommInfo* info = cell->info.load(std::memory_order_acquire);
  cell->key.store(kCellEnded, std::memory_order_release);
  g_live_comms.fetch_sub(1, std::memory_order_relaxed);
  g_rt->comms_epoch.fetch_add(1, std::memory_order_release);
  return info;
}

CommInfo* Lookup(ncclComm_t handle) {
  uint64_t epoch = g_rt->comms_epoch.load(std::memory_order_acquire);
  if (t_lookup.handle == handle && t_lookup.epoch == epoch && t_lookup.info != nullptr) {
    return t_lookup.info;
  }
  if (CommInfo* info = FindComm(handle)) {
    // Tagged with the epoch read before the lookup: a change in between makes it stale.
    t_lookup = LookupCache{handle, info, epoch};
    return info;
  }
  if (CellOf(handle, false) == nullptr && !HasRoom()) return Overflow();
  // Created before we saw it: members cannot agree on an id, so it is this process's own.
  int rank = -1, size = 0;
  if (auto f = FT_REAL_NCCL(ncclCommUserRank)) f(handle, &rank);
  if (auto f = FT_REAL_NCCL(ncclCommCount)) f(handle, &size);
  uint64_t key[2] = {static_cast<uint64_t>(getpid()), reinterpret_cast<uintptr_t>(handle)};
  return Register(handle, Mix(Fnv1a(key, sizeof(key))), rank, size, CommOrigin::kUnknown, 0, 0, -1);
}

// A comm whose rank was unknown at creation (nonblocking split/shrink still initializing): its
// table slot is claimed at its first op that can learn the rank.
void FillIdentity(ncclComm_t handle, CommInfo* info) {
  if (info->slot_claimed) return;
  if (auto f = FT_REAL_NCCL(ncclCommUserRank)) f(handle, &info->rank);
  if (auto f = FT_REAL_NCCL(ncclCommCount)) f(handle, &info->size);
  if (info->rank < 0) return;  // still initializing: try again at the next op
  SpinGuard guard(g_rt->comms_lock);
  auto claimed = g_rt->table->Claim(info->id, info->rank, info->size, g_rt->identity.rank);
  info->slot = claimed ? *claimed : kNoSlot;
  info->slot_claimed = true;
}

uint32_t P2PSlot(CommInfo* info) {
  int state = info->p2p_state.load(std::memory_order_acquire);
  if (state == 2) return info->p2p_slot.load(std::memory_order_relaxed);
  // One thread claims; one racing it meanwhile leaves its op out of the table rather than
  // wait (the table then shows a gap in the p2p numbering, never a wrong op).
  if (state != 0 || !info->p2p_state.compare_exchange_strong(state, 1, std::memory_order_acq_rel)) {
    return kNoSlot;
  }
  std::optional<uint32_t> claimed;
  {
    SpinGuard guard(g_rt->comms_lock);  // Claim's writers (app threads only; no allocation)
    claimed = g_rt->table->Claim(P2PSlotId(info->id), info->rank, info->size, g_rt->identity.rank,
                                 shm::kCommSlotP2P);
  }
  info->p2p_slot.store(claimed ? *claimed : kNoSlot, std::memory_order_relaxed);
  info->p2p_state.store(2, std::memory_order_release);
  return claimed ? *claimed : kNoSlot;
}

}  // namespace ft::preload::internal

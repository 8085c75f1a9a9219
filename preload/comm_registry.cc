#include "preload/comm_registry.h"

#include <unistd.h>

#include "common/log.h"
#include "preload/real.h"

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

}  // namespace

CommInfo* Register(ncclComm_t handle, uint64_t id, int rank, int size, CommOrigin origin,
                   uint64_t parent_id, uint32_t ordinal, int color) {
  auto* info = new CommInfo;
  info->id = id;
  info->rank = rank;
  info->size = size;
  {
    SpinGuard guard(g_rt->comms_lock);
    // A nonblocking split/shrink does not know its rank yet: its slot is claimed at its first
    // op, when it does (the slot's identity fields are written once).
    if (rank >= 0) {
      auto claimed = g_rt->table->Claim(id, rank, size, g_rt->identity.rank);
      info->slot = claimed ? *claimed : kNoSlot;
      info->slot_claimed = true;
    }
    g_rt->comm_infos.emplace_back(info);
    g_rt->comms[handle] = info;  // a reused handle replaces a destroyed comm
    g_rt->comms_epoch.fetch_add(1, std::memory_order_release);
  }
  auto r = MakeRecord(RecordType::kCommInit, static_cast<uint16_t>(origin), info->slot, id, 0, NowNs());
  r.a = static_cast<uint32_t>(rank) | (static_cast<uint64_t>(static_cast<uint32_t>(size)) << 32);
  r.b = static_cast<uint64_t>(static_cast<int64_t>(g_rt->identity.rank));
  r.c = parent_id;
  r.d = (static_cast<uint64_t>(ordinal) << 32) | static_cast<uint32_t>(color);
  Push(r);
  FT_LOG(Debug, Preload, "comm {:016x} rank {}/{} (origin {})", id, rank, size,
         static_cast<int>(origin));
  return info;
}

CommInfo* Lookup(ncclComm_t handle) {
  uint64_t epoch = g_rt->comms_epoch.load(std::memory_order_acquire);
  if (t_lookup.handle == handle && t_lookup.epoch == epoch && t_lookup.info != nullptr) {
    return t_lookup.info;
  }
  {
    SpinGuard guard(g_rt->comms_lock);
    auto it = g_rt->comms.find(handle);
    if (it != g_rt->comms.end()) {
      // Tagged with the epoch read before the lookup: a change in between makes it stale.
      t_lookup = LookupCache{handle, it->second, epoch};
      return it->second;
    }
  }
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
  // Caller holds info->p2p_lock.
  if (!info->p2p_claimed) {
    info->p2p_claimed = true;
    SpinGuard guard(g_rt->comms_lock);
    auto claimed = g_rt->table->Claim(P2PSlotId(info->id), info->rank, info->size,
                                      g_rt->identity.rank, shm::kCommSlotP2P);
    info->p2p_slot = claimed ? *claimed : kNoSlot;
  }
  return info->p2p_slot;
}

}  // namespace ft::preload::internal

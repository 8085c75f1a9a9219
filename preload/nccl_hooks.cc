// The NCCL hooks (runtime.h): op numbering and timing, groups, communicator creation and end,
// API errors. App threads only.
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include "preload/api_symbol_ids.h"
#include "preload/comm_registry.h"
#include "preload/poller_rules.h"
#include "preload/real.h"
#include "preload/hook_failures.h"
#include "preload/runtime.h"
#include "preload/runtime_state.h"
#include "preload/timing.h"
#include "shm/records.h"

namespace ft::preload {

// As the unnamed namespace this code lived in: the internals are found unqualified.
using namespace internal;

namespace internal {

constinit thread_local int t_group_depth = 0;

}  // namespace internal

namespace {

uint64_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 1;  // fp8 and anything newer
  }
}

struct GroupOp {
  OpRef ref;
  ncclComm_t comm;
  CommInfo* info;
  cudaStream_t stream;
  int device;
  bool timed;
};

thread_local std::vector<GroupOp>* t_group_ops = nullptr;

// A timed op once its call returned: with its end event when it succeeded; without one when it
// goes on in the background (ncclInProgress: nothing on the stream yet marks its end) or failed.
void SubmitByResult(Pending* p, ncclResult_t result, AppCuda& cuda) {
  if (result == ncclSuccess) {
    Submit(p, true, cuda);
    return;
  }
  if (result == ncclInProgress) {
    p->FlagOps(kFlagInProgress);
  } else {
    p->failed = true;
  }
  Submit(p, false, cuda);
}

void ApiErrorRecord(NcclSym sym, ncclResult_t result, uint64_t comm_id) {
  if (g_rt == nullptr) return;
  auto r = MakeRecord(RecordType::kApiError, kFlagError, kNoSlot, comm_id, 0, NowNs());
  r.a = static_cast<uint64_t>(ApiLibrary::kNccl);
  r.b = ApiSymbolIdOf(sym);
  r.c = static_cast<uint64_t>(result);
  Push(r);
}

}  // namespace

void NcclPreOp(OpCall* call, OpKind op, bool p2p, size_t count, ncclDataType_t dtype, int peer,
               ncclComm_t comm, cudaStream_t stream) noexcept {
  try {
    MaybeFail(shm::HookPlace::kNcclPreOp);
    NoteCall();
    CommInfo* info = Lookup(comm);
    FillIdentity(comm, info);
    call->comm = info;
    call->handle = comm;
    uint64_t now = NowNs();
    AppCuda cuda;
    Capture capture = StreamCapturing(stream, cuda);
    bool captured = capture == Capture::kYes;
    uint16_t flags = p2p ? kFlagP2P : 0;
    if (t_group_depth > 0) flags |= kFlagGrouped;
    uint64_t bytes = count * TypeSize(dtype);
    uint64_t seq = 0;
    uint32_t slot = info->slot;
    uint64_t slot_seq = 0;
    if (captured) {
      flags |= kFlagCaptured;
    } else if (p2p) {
      P2PCounters* counters = info->p2p_counters.load(std::memory_order_acquire);
      if (counters == nullptr) {
        auto* made = new P2PCounters(info->size);  // outside any lock; the loser frees its own
        if (info->p2p_counters.compare_exchange_strong(counters, made, std::memory_order_acq_rel)) {
          counters = made;
        } else {
          delete made;
        }
      }
      seq = counters->Next((static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 1) |
                           (op == OpKind::kRecv ? 1 : 0));
      slot = P2PSlot(info);
      slot_seq = info->p2p_ops.fetch_add(1, std::memory_order_relaxed) + 1;
    } else {
      seq = info->coll_seq.fetch_add(1, std::memory_order_relaxed) + 1;
      slot_seq = seq;
    }
    call->seq = seq;
    call->flags = flags;
    g_rt->ops_entered.fetch_add(1, std::memory_order_relaxed);
    if (!captured && slot != kNoSlot) {
      g_rt->table->EnterOp(slot, slot_seq, static_cast<uint32_t>(op), bytes, peer, now);
    }
    auto r = MakeRecord(RecordType::kOpEnter, flags, slot, info->id, seq, now);
    r.a = shm::OpArgsWord(op, static_cast<uint8_t>(dtype), peer);
    r.b = bytes;
    r.c = reinterpret_cast<uintptr_t>(stream);
    r.d = count;
    // The poller pushes its records once per round under one acquisition of the ring lock, so
    // the lock and the ring's head stay in this thread's cache between its rounds.
    Push(r);
    OpRef ref;
    ref.comm_id = info->id;
    ref.seq = slot_seq;
    ref.entered_ns = now;
    ref.record_seq = seq;
    ref.record_a = r.a;
    ref.slot = slot;
    ref.flags = flags;
    if (captured) return;
    if (t_group_depth > 0) {
      if (t_group_ops == nullptr) t_group_ops = new std::vector<GroupOp>;
      t_group_ops->push_back(GroupOp{ref, comm, info, stream, CurrentDevice(cuda),
                                     capture == Capture::kNo});
      call->grouped = true;
      return;
    }
    call->pending = capture == Capture::kNo ? BeginTiming(stream, cuda) : nullptr;
    if (call->pending == nullptr) {
      // Untimed: never reported complete on its own; its lane may vouch for it (post-hook).
      call->pending = BeginUntimed(stream, capture == Capture::kNo, cuda);
      ref.flags |= kFlagUntimed;
    }
    call->pending->AddOp(ref);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclPreOp);
    call->pending = nullptr;
  }
}

void NcclPostOp(OpCall* call, NcclSym sym, ncclResult_t result) noexcept {
  try {
    MaybeFail(shm::HookPlace::kNcclPostOp);
    if (result != ncclSuccess && result != ncclInProgress) {
      NcclApiError(sym, result, nullptr);
    }
    Pending* p = call->pending;
    if (p == nullptr) return;
    AppCuda cuda;
    if (!p->has_start) {
      // Untimed. Issued in the background (ncclInProgress) or failed: nothing on the stream
      // yet that a later event could vouch for.
      if (result == ncclSuccess) {
        NoteUntimed(p, cuda);
      } else {
        ReturnUnsubmitted(p);
      }
    } else {
      if (result == ncclInProgress) {
        p->await_comms.push_back(call->handle);
        p->await_infos.push_back(call->comm);
      }
      SubmitByResult(p, result, cuda);
    }
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclPostOp);
  }
}

void NcclGroupStartPost(ncclResult_t result) noexcept {
  NoteCall();
  if (result == ncclSuccess) ++t_group_depth;
}

struct GroupEndToken {
  std::vector<GroupOp> ops;
  std::vector<Pending*> pendings;  // one per stream
};

// One per thread, reused by every outermost ncclGroupEnd (only the outermost gets one, so at
// most one is in use), with t_group_ops: a group allocates nothing once warm.
static constinit thread_local GroupEndToken* t_group_token = nullptr;

void* NcclGroupEndPre() noexcept {
  NoteCall();
  if (t_group_depth != 1) return nullptr;
  try {
    MaybeFail(shm::HookPlace::kNcclGroupEndPre);
    if (t_group_token == nullptr) t_group_token = new GroupEndToken;
    GroupEndToken* token = t_group_token;
    token->ops.clear();
    token->pendings.clear();
    if (t_group_ops != nullptr) token->ops.swap(*t_group_ops);
    AppCuda cuda;
    // One start event per stream, recorded before the outermost end issues the group's work.
    for (const GroupOp& op : token->ops) {
      Pending* found = nullptr;
      for (Pending* p : token->pendings) {
        if (p->stream == op.stream) found = p;
      }
      if (found == nullptr) {
        if (op.timed) {
          DeviceScope scope(op.device, cuda);
          found = BeginTiming(op.stream, cuda);
        }
        if (found == nullptr) {
          DeviceScope scope(op.device, cuda);
          found = BeginUntimed(op.stream, op.timed, cuda);
        }
        token->pendings.push_back(found);
      }
      found->AddOp(op.ref);
      bool known = false;
      for (CommInfo* c : found->await_infos) known |= c == op.info;
      if (!known) {
        found->await_infos.push_back(op.info);
        found->await_comms.push_back(op.comm);
      }
    }
    return token;
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclGroupEndPre);
    return nullptr;
  }
}

void NcclGroupEndPost(void* opaque, ncclResult_t result) noexcept {
  if (t_group_depth > 0) --t_group_depth;  // NCCL closes the group even when it fails
  auto* token = static_cast<GroupEndToken*>(opaque);
  if (token == nullptr) {
    if (result != ncclSuccess && result != ncclInProgress) {
      NcclApiError(NcclSym::k_ncclGroupEnd, result, nullptr);
    }
    return;
  }
  try {
    MaybeFail(shm::HookPlace::kNcclGroupEndPost);
    if (result != ncclSuccess && result != ncclInProgress) {
      NcclApiError(NcclSym::k_ncclGroupEnd, result, nullptr);
    }
    AppCuda cuda;
    for (Pending* p : token->pendings) {
      if (!p->has_start) {
        // Untimed (see NcclPostOp): only work the outermost end put on the stream can be
        // vouched for.
        p->await_comms.clear();
        p->await_infos.clear();
        if (result == ncclSuccess) {
          DeviceScope scope(p->device, cuda);
          NoteUntimed(p, cuda);
        } else {
          ReturnUnsubmitted(p);
        }
      } else if (result == ncclSuccess) {
        p->await_comms.clear();
        p->await_infos.clear();
        DeviceScope scope(p->device, cuda);
        SubmitByResult(p, result, cuda);
      } else {
        SubmitByResult(p, result, cuda);
      }
    }
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclGroupEndPost);
  }
  token->ops.clear();
  token->pendings.clear();
}

void NcclInitPost(NcclSym sym, ncclResult_t result, ncclComm_t* out, int nranks, int rank,
                  const ncclUniqueId* ids, int nids) noexcept {
  NoteCall();
  if (result != ncclSuccess && result != ncclInProgress) {
    NcclApiError(sym, result, nullptr);
    return;
  }
  if (out == nullptr || *out == nullptr || ids == nullptr || nids <= 0) return;
  try {
    MaybeFail(shm::HookPlace::kNcclInitPost);
    uint64_t h = Fnv1a(ids, sizeof(ncclUniqueId) * static_cast<size_t>(nids));
    Register(*out, Mix(h), rank, nranks, CommOrigin::kInit, 0, 0, -1);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclInitPost);
  }
}

void NcclInitAllPost(ncclResult_t result, ncclComm_t* out, int ndev) noexcept {
  NoteCall();
  if (result != ncclSuccess || out == nullptr || ndev <= 0) {
    if (result != ncclSuccess) NcclApiError(NcclSym::k_ncclCommInitAll, result, nullptr);
    return;
  }
  try {
    MaybeFail(shm::HookPlace::kNcclInitAllPost);
    static std::atomic<uint64_t> counter{0};
    uint64_t key[2] = {static_cast<uint64_t>(getpid()), counter.fetch_add(1)};
    uint64_t id = Mix(Fnv1a(key, sizeof(key)));
    // All members live in this process and share the id; the in-flight table has one slot per
    // id, so only member 0 writes it (the others are tracked by ring records).
    for (int i = 0; i < ndev; ++i) {
      if (out[i] == nullptr) continue;
      CommInfo* info = Register(out[i], id, i, ndev, CommOrigin::kInitAll, 0, 0, -1);
      if (i > 0) info->slot = kNoSlot;
    }
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclInitAllPost);
  }
}

uint32_t NcclNextOrdinal(ncclComm_t parent) noexcept {
  NoteCall();
  try {
    MaybeFail(shm::HookPlace::kNcclNextOrdinal);
    return Lookup(parent)->ordinals.fetch_add(1) + 1;
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclNextOrdinal);
    return 0;
  }
}

void NcclSplitPost(ncclResult_t result, ncclComm_t parent, uint32_t ordinal, int color,
                   ncclComm_t* out) noexcept {
  if (result != ncclSuccess && result != ncclInProgress) {
    NcclApiError(NcclSym::k_ncclCommSplit, result, parent);
    return;
  }
  if (out == nullptr || *out == nullptr) return;  // NCCL_SPLIT_NOCOLOR
  try {
    MaybeFail(shm::HookPlace::kNcclSplitPost);
    CommInfo* p = Lookup(parent);
    uint64_t key[3] = {p->id, ordinal, static_cast<uint64_t>(static_cast<int64_t>(color))};
    int rank = -1, size = 0;
    if (result == ncclSuccess) {
      if (auto f = FT_REAL_NCCL(ncclCommUserRank)) f(*out, &rank);
      if (auto f = FT_REAL_NCCL(ncclCommCount)) f(*out, &size);
    }
    Register(*out, Mix(Fnv1a(key, sizeof(key))), rank, size, CommOrigin::kSplit, p->id, ordinal,
             color);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclSplitPost);
  }
}

void NcclShrinkPost(ncclResult_t result, ncclComm_t parent, uint32_t ordinal, const int* excluded,
                    int nexcluded, ncclComm_t* out) noexcept {
  if (result != ncclSuccess && result != ncclInProgress) {
    NcclApiError(NcclSym::k_ncclCommShrink, result, parent);
    return;
  }
  if (out == nullptr || *out == nullptr) return;
  try {
    MaybeFail(shm::HookPlace::kNcclShrinkPost);
    CommInfo* p = Lookup(parent);
    // Color of a shrink: a hash of the excluded set, which every member passes identically.
    uint64_t color = excluded != nullptr && nexcluded > 0
                         ? Fnv1a(excluded, sizeof(int) * static_cast<size_t>(nexcluded))
                         : 0;
    uint64_t key[4] = {p->id, ordinal, color, 0x736872696e6bull /* "shrink" */};
    int rank = -1, size = 0;
    if (result == ncclSuccess) {
      if (auto f = FT_REAL_NCCL(ncclCommUserRank)) f(*out, &rank);
      if (auto f = FT_REAL_NCCL(ncclCommCount)) f(*out, &size);
    }
    Register(*out, Mix(Fnv1a(key, sizeof(key))), rank, size, CommOrigin::kShrink, p->id, ordinal,
             -1);
  } catch (...) {
    CountHookFailure(shm::HookPlace::kNcclShrinkPost);
  }
}

CommInfo* NcclEndCommPre(ncclComm_t comm) noexcept {
  NoteCall();
  CommInfo* info = UnregisterComm(comm);  // a handle NCCL reuses later is a new comm
  if (info == nullptr) return nullptr;
  EndAndWaitForPoller(info);  // the info itself stays: the poller may still refer to it
  return info;
}

void NcclEndCommPost(NcclSym sym, CommInfo* info, ncclResult_t result) noexcept {
  if (result != ncclSuccess && result != ncclInProgress) {
    ApiErrorRecord(sym, result, info != nullptr ? info->id : 0);
  }
  if (info == nullptr) return;
  auto r = MakeRecord(RecordType::kCommEnd, 0, info->slot, info->id, 0, NowNs());
  r.a = sym == NcclSym::k_ncclCommAbort ? 2 : 1;
  Push(r);
}

void NcclApiError(NcclSym sym, ncclResult_t result, ncclComm_t comm) noexcept {
  if (g_rt == nullptr) return;
  uint64_t comm_id = 0;
  if (comm != nullptr) {
    if (CommInfo* info = FindComm(comm)) comm_id = info->id;
  }
  ApiErrorRecord(sym, result, comm_id);
}

}  // namespace ft::preload

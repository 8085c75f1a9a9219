// The exported NCCL wrappers, one per line of nccl.def. Each forwards to the real function
// (pnccl* when present) and, while libft.so is active, runs the hook its kind names around
// the call. The app always gets the real function's return value.
#include <nccl.h>

#include "preload/real.h"
#include "preload/runtime.h"

#define FT_EXPORT __attribute__((visibility("default")))

namespace ft::preload {
namespace {

// The hooks, one per kind. Each is a statement list ending in `return`; `call` forwards with
// the wrapper's own arguments, `kSym` names the symbol.
#define FT_NCCL_HOOK_PASS                                           \
  NoteCall();                                                       \
  ncclResult_t result = call();                                     \
  if (result != ncclSuccess && result != ncclInProgress) NcclApiError(kSym, result, nullptr); \
  return result;

// A collective (root: its root rank, or -1) or a point-to-point op (peer: the other rank).
#define FT_NCCL_HOOK_OP(op, p2p, count, dtype, root_or_peer, comm, stream)              \
  OpCall op_call;                                                                      \
  NcclPreOp(&op_call, OpKind::op, p2p, count, dtype, root_or_peer, comm, stream);      \
  ncclResult_t result = call();                                                        \
  NcclPostOp(&op_call, kSym, result);                                                  \
  return result;
#define FT_NCCL_HOOK_COLL(op, count, dtype, root, comm, stream) \
  FT_NCCL_HOOK_OP(op, false, count, dtype, root, comm, stream)
#define FT_NCCL_HOOK_P2P(op, count, dtype, peer, comm, stream) \
  FT_NCCL_HOOK_OP(op, true, count, dtype, peer, comm, stream)

#define FT_NCCL_HOOK_GROUP_START     \
  ncclResult_t result = call();      \
  NcclGroupStartPost(result);        \
  return result;

#define FT_NCCL_HOOK_GROUP_END             \
  void* token = NcclGroupEndPre();         \
  ncclResult_t result = call();            \
  NcclGroupEndPost(token, result);         \
  return result;

#define FT_NCCL_HOOK_INIT(out, nranks, rank, ids, nids)   \
  ncclResult_t result = call();                           \
  NcclInitPost(kSym, result, out, nranks, rank, ids, nids); \
  return result;

#define FT_NCCL_HOOK_INIT_ALL(out, ndev)   \
  ncclResult_t result = call();            \
  NcclInitAllPost(result, out, ndev);      \
  return result;

#define FT_NCCL_HOOK_SPLIT(parent, color, out)                   \
  uint32_t ordinal = NcclNextOrdinal(parent);                    \
  ncclResult_t result = call();                                  \
  NcclSplitPost(result, parent, ordinal, color, out);            \
  return result;

#define FT_NCCL_HOOK_SHRINK(parent, excluded, nexcluded, out)                  \
  uint32_t ordinal = NcclNextOrdinal(parent);                                  \
  ncclResult_t result = call();                                                \
  NcclShrinkPost(result, parent, ordinal, excluded, nexcluded, out);           \
  return result;

#define FT_NCCL_HOOK_END_COMM(comm)              \
  CommInfo* ended = NcclEndCommPre(comm);        \
  ncclResult_t result = call();                  \
  NcclEndCommPost(kSym, ended, result);          \
  return result;

}  // namespace
}  // namespace ft::preload

#define FT_NCCL(ret, name, params, args, kind)                                        \
  extern "C" FT_EXPORT ret name params {                                              \
    using namespace ::ft::preload;                                                    \
    constexpr NcclSym kSym = NcclSym::k_##name;                                       \
    using Fn = ret(*) params;                                                         \
    Fn real = reinterpret_cast<Fn>(RealNccl(kSym));                                   \
    if (real == nullptr) return MissingReal<ret>();                                   \
    auto call = [&]() -> ret { return real args; };                                   \
    if (!Intercepting()) return call();                                               \
    ReentryGuard guard;                                                               \
    FT_NCCL_HOOK_##kind                                                               \
  }
#include "shm/nccl.def"
#undef FT_NCCL

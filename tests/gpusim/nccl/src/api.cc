// The exported C API. Each function is a strong pncclX and a weak alias ncclX (NCCL's profiling
// interface). No C++ exception crosses this boundary; nothing here exits the process.
#include <nccl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "comm.h"
#include "cudart.h"
#include "group.h"
#include "hash.h"
#include "ops.h"
#include "violation.h"

namespace gpusim::nccl {
namespace {

template <class F>
ncclResult_t Guard(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    SetGlobalLastError("gpusim NCCL: out of memory");
    return ncclSystemError;
  } catch (...) {
    SetGlobalLastError("gpusim NCCL: internal error");
    return ncclInternalError;
  }
}

void Fail(const char* fn, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void Fail(const char* fn, const char* fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char line[1024];
  std::snprintf(line, sizeof line, "%s: %s", fn, msg);
  SetGlobalLastError(line);
}

// An enum argument as the caller passed it. Reading an out-of-range value through the enum
// type is undefined (UBSan flags it), and garbage from the application must only produce
// ncclInvalidArgument.
template <class E>
int Raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// The core behind a handle; validates the handle. ready: the communicator must be
// initialized and usable (not revoked).
ncclResult_t GetCore(ncclComm_t comm, const char* fn, std::shared_ptr<CommCore>* out,
                     bool ready = true) {
  if (comm == nullptr) {
    Fail(fn, "comm is NULL");
    return ncclInvalidArgument;
  }
  const uint64_t magic = comm->magic.load(std::memory_order_acquire);
  if (magic == kDeadCommMagic) {
    Violation(fn, comm, "after ncclCommDestroy or ncclCommAbort returned");
    Fail(fn, "comm %p was destroyed or aborted", static_cast<void*>(comm));
    return ncclInvalidArgument;
  }
  const int ender = comm->ender.load(std::memory_order_acquire);
  if (ender != 0 && ender != gettid()) {
    Violation(fn, comm, "while another thread is inside ncclCommDestroy or ncclCommAbort");
  }
  std::shared_ptr<CommCore> core = comm->core.load(std::memory_order_acquire);
  if (magic != kCommMagic || core == nullptr) {
    Fail(fn, "comm %p is not a valid communicator (destroyed?)", static_cast<void*>(comm));
    return ncclInvalidArgument;
  }
  if (ready) {
    int st = core->init_state.load(std::memory_order_acquire);
    if (st == ncclInProgress) {
      Fail(fn, "communicator %s is still initializing (poll ncclCommGetAsyncError)",
           core->name.c_str());
      return ncclInvalidUsage;
    }
    if (st != ncclSuccess) {
      Fail(fn, "communicator %s failed to initialize: %s", core->name.c_str(),
           core->last_error());
      return static_cast<ncclResult_t>(st);
    }
    if (core->revoked.load()) {
      Fail(fn, "communicator %s was revoked", core->name.c_str());
      return ncclInvalidUsage;
    }
  }
  *out = std::move(core);
  return ncclSuccess;
}

// Destroy and abort: the calling thread owns the communicator until it returns (a second
// thread ending it at the same time is a violation too).
void BeginEnd(ncclComm_t comm, const char* fn) {
  int none = 0;
  if (!comm->ender.compare_exchange_strong(none, gettid(), std::memory_order_acq_rel)) {
    Violation(fn, comm, "while another thread is inside ncclCommDestroy or ncclCommAbort");
  }
}

// Real NCCL's teardown (proxy threads, connections, memory) takes a while; so does ours when
// GPUSIM_NCCL_TEARDOWN_MS says so, which makes a racing call from another thread visible.
void Teardown(const CommCore& c) {
  if (c.cfg.teardown_ms > 0) SleepMs(c.cfg.teardown_ms);
}

// Waits (polling) until pred holds.
template <class P>
void WaitFor(P pred) {
  for (int i = 0; !pred(); ++i) {
    if (i < 50) std::this_thread::yield();
    else SleepMs(1);
  }
}

ncclResult_t NewHandle(std::shared_ptr<CommCore> core, ncclComm_t* out) {
  auto* h = new ncclComm();
  h->core.store(std::move(core), std::memory_order_release);
  *out = h;
  return ncclSuccess;
}

// Every tombstone, so that leak checkers see them reachable.
std::atomic<ncclComm*> g_tombstones{nullptr};

// The handle becomes a tombstone (kDeadCommMagic); the core goes when its last operation does.
void FreeHandle(ncclComm_t comm) {
  comm->magic.store(kDeadCommMagic, std::memory_order_release);
  comm->core.store(nullptr, std::memory_order_release);
  comm->ender.store(0, std::memory_order_release);
  comm->next_dead = g_tombstones.load(std::memory_order_relaxed);
  while (!g_tombstones.compare_exchange_weak(comm->next_dead, comm, std::memory_order_release,
                                             std::memory_order_relaxed)) {
  }
}

// ---- creation ------------------------------------------------------------------------------

ncclResult_t InitRankConfig(const char* fn, ncclComm_t* newcomm, int nranks,
                            const ncclUniqueId& id, int rank, ncclConfig_t* config) {
  if (newcomm == nullptr) {
    Fail(fn, "newcomm is NULL");
    return GroupFail(ncclInvalidArgument);
  }
  *newcomm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    Fail(fn, "invalid rank %d / nranks %d", rank, nranks);
    return GroupFail(ncclInvalidArgument);
  }
  int blocking = -1;
  const char* name = nullptr;
  if (ncclResult_t r = ReadUserConfig(config, &blocking, &name); r != ncclSuccess) {
    return GroupFail(r);
  }
  auto core = std::make_shared<CommCore>(config, 1);
  core->Setup(id, nranks, rank);
  ncclComm_t handle = nullptr;
  NewHandle(core, &handle);
  *newcomm = handle;
  CommJob job;
  job.chain = core.get();
  job.blocking = core->blocking;
  job.run = [core] { return RunInit(core); };
  job.drop = [core](ncclResult_t r) { core->init_state.store(r); };
  ncclResult_t r = EnqueueCommJob(std::move(job));
  if (r != ncclSuccess && r != ncclInProgress && !InGroup()) {
    FreeHandle(handle);
    *newcomm = nullptr;
  }
  return r;
}

// Builds the job that makes a child communicator of parent: a split exchange (if exchange is
// set) and then the child's init. core is null for NCCL_SPLIT_NOCOLOR members.
ncclResult_t DeriveChild(const std::shared_ptr<CommCore>& parent,
                         std::shared_ptr<CommCore> core, bool blocking,
                         std::function<ncclResult_t(ncclUniqueId*, int*, int*)> members) {
  if (!blocking) parent->in_progress.fetch_add(1);
  CommJob job;
  job.chain = parent.get();
  job.blocking = blocking;
  job.run = [parent, core, blocking, members = std::move(members)]() -> ncclResult_t {
    ncclUniqueId id;
    int nranks = 0, rank = -1;
    ncclResult_t r = members(&id, &nranks, &rank);
    if (r == ncclSuccess && core != nullptr) {
      core->Setup(id, nranks, rank);
      r = RunInit(core);
    } else if (core != nullptr) {
      core->SetLastError("%s", parent->last_error());
      core->init_state.store(r);
    }
    if (!blocking) parent->in_progress.fetch_sub(1);
    return r;
  };
  job.drop = [parent, core, blocking](ncclResult_t r) {
    if (core != nullptr) core->init_state.store(r);
    if (!blocking) parent->in_progress.fetch_sub(1);
  };
  return EnqueueCommJob(std::move(job));
}

}  // namespace
}  // namespace gpusim::nccl

using namespace gpusim::nccl;

#define NCCL_ALIAS(name) \
  extern "C" __attribute__((weak, alias("p" #name), visibility("default"))) decltype(p##name) name;
#define NCCL_API extern "C" __attribute__((visibility("default")))

NCCL_API ncclResult_t pncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
NCCL_ALIAS(ncclGetVersion)

namespace gpusim::nccl {
namespace {
ncclResult_t NewUniqueId(ncclUniqueId* uniqueId) {
  size_t got = 0;
  while (got < sizeof uniqueId->internal) {
    ssize_t n = getrandom(uniqueId->internal + got, sizeof uniqueId->internal - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      Fail("ncclGetUniqueId", "getrandom failed: %s", std::strerror(errno));
      return ncclSystemError;
    }
    got += static_cast<size_t>(n);
  }
  return ncclSuccess;
}
}  // namespace
}  // namespace gpusim::nccl

NCCL_API ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return ncclInvalidArgument;
  return NewUniqueId(uniqueId);
}
NCCL_ALIAS(ncclGetUniqueId)

NCCL_API const char* pncclGetErrorString(ncclResult_t result) {
  switch (Raw(result)) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (see ncclGetLastError)";
    case ncclSystemError: return "unhandled system error (see ncclGetLastError)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (see ncclGetLastError)";
    case ncclInvalidUsage: return "invalid usage (see ncclGetLastError)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}
NCCL_ALIAS(ncclGetErrorString)

NCCL_API const char* pncclGetLastError(ncclComm_t comm) {
  if (comm != nullptr && comm->magic.load(std::memory_order_acquire) == kCommMagic) {
    // The core outlives this call only if the handle does: reading it here is as safe as in NCCL.
    std::shared_ptr<CommCore> core = comm->core.load(std::memory_order_acquire);
    if (core != nullptr && core->last_error()[0] != '\0') return core->last_error();
  }
  return GlobalLastError();
}
NCCL_ALIAS(ncclGetLastError)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
NCCL_API void pncclResetDebugInit() {}
NCCL_ALIAS(ncclResetDebugInit)
#pragma GCC diagnostic pop

NCCL_API ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return ncclInvalidArgument;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size == 0 ? 1 : size) != 0) {
    Fail("ncclMemAlloc", "cannot allocate %zu bytes", size);
    return ncclSystemError;
  }
  *ptr = p;
  return ncclSuccess;
}
NCCL_ALIAS(ncclMemAlloc)

NCCL_API ncclResult_t pncclMemFree(void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}
NCCL_ALIAS(ncclMemFree)

NCCL_API ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                              int rank, ncclConfig_t* config) {
  return Guard([&] { return InitRankConfig("ncclCommInitRankConfig", comm, nranks, commId, rank, config); });
}
NCCL_ALIAS(ncclCommInitRankConfig)

NCCL_API ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return Guard([&] { return InitRankConfig("ncclCommInitRank", comm, nranks, commId, rank, nullptr); });
}
NCCL_ALIAS(ncclCommInitRank)

NCCL_API ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                ncclUniqueId* commIds, ncclConfig_t* config) {
  return Guard([&] {
    if (nId < 1 || commIds == nullptr) {
      Fail("ncclCommInitRankScalable", "need at least one unique id (nId %d, commIds %p)", nId,
           static_cast<void*>(commIds));
      return GroupFail(ncclInvalidArgument);
    }
    return InitRankConfig("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config);
  });
}
NCCL_ALIAS(ncclCommInitRankScalable)

NCCL_API ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return Guard([&]() -> ncclResult_t {
    if (comms == nullptr || ndev < 1) {
      Fail("ncclCommInitAll", "invalid arguments (comms %p, ndev %d)", static_cast<void*>(comms), ndev);
      return ncclInvalidArgument;
    }
    ncclUniqueId id;
    if (ncclResult_t r = NewUniqueId(&id); r != ncclSuccess) return r;
    std::vector<std::shared_ptr<CommCore>> cores;
    for (int i = 0; i < ndev; ++i) {
      auto core = std::make_shared<CommCore>(nullptr, 1);
      core->Setup(id, ndev, i);
      core->cuda_dev = devlist != nullptr ? devlist[i] : i;
      cores.push_back(core);
    }
    std::vector<ncclResult_t> results(static_cast<size_t>(ndev), ncclSuccess);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] { results[i] = RunInit(cores[i]); });
    }
    for (auto& t : threads) t.join();
    for (ncclResult_t r : results) {
      if (r != ncclSuccess) return r;
    }
    for (int i = 0; i < ndev; ++i) NewHandle(cores[i], &comms[i]);
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclCommInitAll)

NCCL_API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                     ncclConfig_t* config) {
  return Guard([&]() -> ncclResult_t {
    const char* fn = "ncclCommSplit";
    std::shared_ptr<CommCore> parent;
    if (ncclResult_t r = GetCore(comm, fn, &parent); r != ncclSuccess) return GroupFail(r);
    if (newcomm == nullptr || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) {
      Fail(fn, "invalid arguments (newcomm %p, color %d)", static_cast<void*>(newcomm), color);
      return GroupFail(ncclInvalidArgument);
    }
    int blocking = -1;
    const char* name = nullptr;
    if (ncclResult_t r = ReadUserConfig(config, &blocking, &name); r != ncclSuccess) return GroupFail(r);
    if (blocking < 0) blocking = parent->blocking ? 1 : 0;
    const uint64_t exchange = parent->split_exchanges.fetch_add(1);
    const uint64_t ordinal = parent->derive_ordinal.fetch_add(1);
    *newcomm = nullptr;
    std::shared_ptr<CommCore> core;
    ncclComm_t handle = nullptr;
    if (color != NCCL_SPLIT_NOCOLOR) {
      core = std::make_shared<CommCore>(config, blocking);
      core->blocking = blocking != 0;
      core->cuda_dev = parent->cuda_dev;
      NewHandle(core, &handle);
      *newcomm = handle;
    }
    CommCore* p = parent.get();
    ncclResult_t r = DeriveChild(
        parent, core, blocking != 0,
        [p, exchange, ordinal, color, key](ncclUniqueId* id, int* nranks, int* rank) {
          std::vector<CtrlEntry> all;
          ncclResult_t e = SplitExchange(p, exchange, color, key, &all);
          if (e != ncclSuccess || color == NCCL_SPLIT_NOCOLOR) return e;
          // Members of my color ordered by (key, parent rank).
          std::vector<std::pair<int32_t, int>> members;
          for (int i = 0; i < static_cast<int>(all.size()); ++i) {
            if (all[i].color == color) members.emplace_back(all[i].key, i);
          }
          std::sort(members.begin(), members.end());
          *nranks = static_cast<int>(members.size());
          for (int i = 0; i < *nranks; ++i) {
            if (members[i].second == p->rank) *rank = i;
          }
          *id = DeriveId(p->id, ordinal, color, 'S');
          return ncclSuccess;
        });
    if (r != ncclSuccess && r != ncclInProgress && !InGroup() && handle != nullptr) {
      FreeHandle(handle);
      *newcomm = nullptr;
    }
    return r;
  });
}
NCCL_ALIAS(ncclCommSplit)

NCCL_API ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                      ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return Guard([&]() -> ncclResult_t {
    const char* fn = "ncclCommShrink";
    std::shared_ptr<CommCore> parent;
    if (ncclResult_t r = GetCore(comm, fn, &parent); r != ncclSuccess) return GroupFail(r);
    if (newcomm == nullptr || excludeRanksCount < 0 ||
        (excludeRanksCount > 0 && excludeRanksList == nullptr) ||
        (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)) {
      Fail(fn, "invalid arguments");
      return GroupFail(ncclInvalidArgument);
    }
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    std::sort(excluded.begin(), excluded.end());
    excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
    for (int r : excluded) {
      if (r < 0 || r >= parent->nranks || r == parent->rank) {
        Fail(fn, "invalid excluded rank %d (nranks %d, my rank %d)", r, parent->nranks, parent->rank);
        return GroupFail(ncclInvalidArgument);
      }
    }
    if (static_cast<int>(excluded.size()) >= parent->nranks) return GroupFail(ncclInvalidArgument);
    int blocking = -1;
    const char* name = nullptr;
    if (ncclResult_t r = ReadUserConfig(config, &blocking, &name); r != ncclSuccess) return GroupFail(r);
    if (blocking < 0) blocking = parent->blocking ? 1 : 0;
    if (shrinkFlags == NCCL_SHRINK_ABORT) {
      // Stop the parent's in-flight operations here first (this member only).
      parent->aborted.store(true);
      parent->Ring();
      WaitFor([&] { return parent->executing.load() == 0; });
    }
    const uint64_t ordinal = parent->derive_ordinal.fetch_add(1);
    auto core = std::make_shared<CommCore>(config, blocking);
    core->blocking = blocking != 0;
    core->cuda_dev = parent->cuda_dev;
    ncclComm_t handle = nullptr;
    NewHandle(core, &handle);
    *newcomm = handle;
    CommCore* p = parent.get();
    const int64_t color = static_cast<int64_t>(Hash64(excluded.data(), excluded.size() * sizeof(int), 7) >> 1);
    const int nnew = p->nranks - static_cast<int>(excluded.size());
    const int rnew = p->rank - static_cast<int>(std::lower_bound(excluded.begin(), excluded.end(), p->rank) -
                                                excluded.begin());
    ncclResult_t r = DeriveChild(parent, core, blocking != 0,
                                 [p, ordinal, color, nnew, rnew](ncclUniqueId* id, int* nranks, int* rank) {
                                   *id = DeriveId(p->id, ordinal, color, 'K');
                                   *nranks = nnew;
                                   *rank = rnew;
                                   return ncclSuccess;
                                 });
    if (r != ncclSuccess && r != ncclInProgress && !InGroup()) {
      FreeHandle(handle);
      *newcomm = nullptr;
    }
    return r;
  });
}
NCCL_ALIAS(ncclCommShrink)

NCCL_API ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  return Guard([&]() -> ncclResult_t {
    std::shared_ptr<CommCore> c;
    if (ncclResult_t r = GetCore(comm, "ncclCommFinalize", &c, false); r != ncclSuccess) return r;
    if (c->blocking) {
      WaitFor([&] { return c->outstanding.load() == 0 && c->in_progress.load() == 0; });
      return ncclSuccess;
    }
    c->in_progress.fetch_add(1);
    std::thread([c] {
      WaitFor([&] { return c->outstanding.load() == 0 && c->in_progress.load() == 1; });
      c->in_progress.fetch_sub(1);
    }).detach();
    return ncclInProgress;
  });
}
NCCL_ALIAS(ncclCommFinalize)

NCCL_API ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  return Guard([&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    std::shared_ptr<CommCore> c;
    if (ncclResult_t r = GetCore(comm, "ncclCommDestroy", &c, false); r != ncclSuccess) return r;
    BeginEnd(comm, "ncclCommDestroy");
    // Like NCCL, wait for queued work (this blocks while a collective hangs: use Abort then).
    if (c->init_state.load() == ncclInProgress) c->cancel.store(true);
    WaitFor([&] {
      return c->init_state.load() != ncclInProgress && c->outstanding.load() == 0 &&
             c->in_progress.load() == 0;
    });
    DebugLog(c->cfg, "destroy comm %s rank %d/%d", c->name.c_str(), c->rank, c->nranks);
    Teardown(*c);
    FreeHandle(comm);
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclCommDestroy)

NCCL_API ncclResult_t pncclCommAbort(ncclComm_t comm) {
  return Guard([&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    std::shared_ptr<CommCore> c;
    if (ncclResult_t r = GetCore(comm, "ncclCommAbort", &c, false); r != ncclSuccess) return r;
    BeginEnd(comm, "ncclCommAbort");
    c->cancel.store(true);
    c->aborted.store(true, std::memory_order_release);
    if (c->init_state.load(std::memory_order_acquire) == ncclSuccess) {
      uint32_t zero = 0;
      c->seg->header()->aborted_by.compare_exchange_strong(zero, static_cast<uint32_t>(c->rank + 1));
      c->seg->Ring();
    }
    DebugLog(c->cfg, "abort comm %s rank %d/%d: %d ops executing, %" PRId64 " queued",
             c->name.c_str(), c->rank, c->nranks, c->executing.load(), c->outstanding.load());
    // Ops inside a running host function see the flags at their next step and leave; ops not
    // yet started leave as soon as their host function runs (they hold the core alive).
    WaitFor([&] { return c->executing.load() == 0; });
    Teardown(*c);
    FreeHandle(comm);
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclCommAbort)

NCCL_API ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return Guard([&]() -> ncclResult_t {
    std::shared_ptr<CommCore> c;
    if (ncclResult_t r = GetCore(comm, "ncclCommRevoke", &c); r != ncclSuccess) return r;
    if (revokeFlags != NCCL_REVOKE_DEFAULT) {
      Fail("ncclCommRevoke", "revokeFlags must be NCCL_REVOKE_DEFAULT");
      return ncclInvalidArgument;
    }
    c->revoked.store(true, std::memory_order_release);
    uint32_t zero = 0;
    c->seg->header()->revoked_by.compare_exchange_strong(zero, static_cast<uint32_t>(c->rank + 1));
    c->seg->Ring();
    DebugLog(c->cfg, "revoke comm %s rank %d/%d", c->name.c_str(), c->rank, c->nranks);
    WaitFor([&] { return c->executing.load() == 0; });
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclCommRevoke)

NCCL_API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return Guard([&]() -> ncclResult_t {
    std::shared_ptr<CommCore> c;
    if (ncclResult_t r = GetCore(comm, "ncclCommGetAsyncError", &c, false); r != ncclSuccess) return r;
    if (asyncError == nullptr) return ncclInvalidArgument;
    int st = c->init_state.load(std::memory_order_acquire);
    if (st != ncclSuccess) {
      *asyncError = static_cast<ncclResult_t>(st);
    } else if (c->in_progress.load() > 0) {
      *asyncError = ncclInProgress;
    } else if (c->async_error.load() != ncclSuccess) {
      *asyncError = static_cast<ncclResult_t>(c->async_error.load());
    } else if (c->revoked.load()) {
      *asyncError = ncclSuccess;
    } else if (int who = c->RemoteStopper(); who >= 0) {
      c->SetLastError("communicator %s: rank %d aborted or revoked it", c->name.c_str(), who);
      *asyncError = ncclRemoteError;
    } else {
      *asyncError = ncclSuccess;
    }
    return ncclSuccess;
  });
}
NCCL_ALIAS(ncclCommGetAsyncError)

namespace {
// Count/rank/device are known only once a nonblocking split has finished its exchange.
ncclResult_t Info(ncclComm_t comm, const char* fn, void* out, std::shared_ptr<CommCore>* c) {
  if (ncclResult_t r = GetCore(comm, fn, c, false); r != ncclSuccess) return r;
  if (out == nullptr) {
    Fail(fn, "output pointer is NULL");
    return ncclInvalidArgument;
  }
  if (!(*c)->has_identity.load(std::memory_order_acquire)) return ncclInProgress;
  return ncclSuccess;
}
}  // namespace

NCCL_API ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  std::shared_ptr<CommCore> c;
  if (ncclResult_t r = Info(comm, "ncclCommCount", count, &c); r != ncclSuccess) return r;
  *count = c->nranks;
  return ncclSuccess;
}
NCCL_ALIAS(ncclCommCount)

NCCL_API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  std::shared_ptr<CommCore> c;
  if (ncclResult_t r = Info(comm, "ncclCommCuDevice", device, &c); r != ncclSuccess) return r;
  *device = c->cuda_dev;
  return ncclSuccess;
}
NCCL_ALIAS(ncclCommCuDevice)

NCCL_API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  std::shared_ptr<CommCore> c;
  if (ncclResult_t r = Info(comm, "ncclCommUserRank", rank, &c); r != ncclSuccess) return r;
  *rank = c->rank;
  return ncclSuccess;
}
NCCL_ALIAS(ncclCommUserRank)

NCCL_API ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  std::shared_ptr<CommCore> c;
  if (ncclResult_t r = GetCore(comm, "ncclCommRegister", &c, false); r != ncclSuccess) return r;
  if (handle == nullptr) return ncclInvalidArgument;
  (void)size;
  // Nothing to register in host memory; the handle only has to be non-null and unique enough.
  *handle = buff != nullptr ? buff : static_cast<void*>(comm);
  return ncclSuccess;
}
NCCL_ALIAS(ncclCommRegister)

NCCL_API ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  std::shared_ptr<CommCore> c;
  if (ncclResult_t r = GetCore(comm, "ncclCommDeregister", &c, false); r != ncclSuccess) return r;
  return handle != nullptr ? ncclSuccess : ncclInvalidArgument;
}
NCCL_ALIAS(ncclCommDeregister)

NCCL_API ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                              int winFlags) {
  std::shared_ptr<CommCore> c;
  if (ncclResult_t r = GetCore(comm, "ncclCommWindowRegister", &c, false); r != ncclSuccess) return r;
  if (win == nullptr) return ncclInvalidArgument;
  (void)size;
  (void)winFlags;
  *win = reinterpret_cast<ncclWindow_t>(buff != nullptr ? buff : static_cast<void*>(comm));
  return ncclSuccess;
}
NCCL_ALIAS(ncclCommWindowRegister)

NCCL_API ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  std::shared_ptr<CommCore> c;
  if (ncclResult_t r = GetCore(comm, "ncclCommWindowDeregister", &c, false); r != ncclSuccess) return r;
  return win != nullptr ? ncclSuccess : ncclInvalidArgument;
}
NCCL_ALIAS(ncclCommWindowDeregister)

NCCL_API ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                ncclScalarResidence_t residence, ncclComm_t comm) {
  return Guard([&]() -> ncclResult_t {
    std::shared_ptr<CommCore> c;
    if (ncclResult_t r = GetCore(comm, "ncclRedOpCreatePreMulSum", &c); r != ncclSuccess) return r;
    return c->CreatePreMulSum(op, scalar, Raw(datatype), Raw(residence));
  });
}
NCCL_ALIAS(ncclRedOpCreatePreMulSum)

NCCL_API ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return Guard([&]() -> ncclResult_t {
    std::shared_ptr<CommCore> c;
    if (ncclResult_t r = GetCore(comm, "ncclRedOpDestroy", &c, false); r != ncclSuccess) return r;
    if (Raw(op) < ncclNumOps) {
      Fail("ncclRedOpDestroy", "operator %d is not one ncclRedOpCreatePreMulSum made", Raw(op));
      return ncclInvalidArgument;
    }
    return c->DestroyRedOp(Raw(op));
  });
}
NCCL_ALIAS(ncclRedOpDestroy)

// ---- operations ------------------------------------------------------------------------------
namespace {

bool ValidType(int raw) {
  return raw >= 0 && raw < ncclNumTypes && TypeSize(static_cast<ncclDataType_t>(raw)) != 0;
}

bool IsReduction(OpKind k) {
  return k == OpKind::kAllReduce || k == OpKind::kReduce || k == OpKind::kReduceScatter;
}
bool IsRooted(OpKind k) {
  return k == OpKind::kReduce || k == OpKind::kBroadcast || k == OpKind::kGather ||
         k == OpKind::kScatter || k == OpKind::kSend || k == OpKind::kRecv;
}

ncclResult_t Operation(const char* fn, OpKind kind, const void* send, void* recv, size_t count,
                       int type_raw, int red_raw, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return Guard([&]() -> ncclResult_t {
    std::shared_ptr<CommCore> c;
    if (ncclResult_t r = GetCore(comm, fn, &c); r != ncclSuccess) return GroupFail(r);
    if (!ValidType(type_raw)) {
      c->SetLastError("%s: invalid or unsupported datatype %d (%s)", fn, type_raw,
                      type_raw >= 0 && type_raw < ncclNumTypes
                          ? TypeName(static_cast<ncclDataType_t>(type_raw))
                          : "out of range");
      return GroupFail(ncclInvalidArgument);
    }
    const ncclDataType_t type = static_cast<ncclDataType_t>(type_raw);
    OpArgs a;
    if (IsReduction(kind) && !c->ResolveRedOp(red_raw, type, &a.red)) {
      c->SetLastError("%s: invalid reduction operator %d for datatype %s", fn, red_raw,
                      TypeName(type));
      return GroupFail(ncclInvalidArgument);
    }
    if (IsRooted(kind) && (root < 0 || root >= c->nranks)) {
      c->SetLastError("%s: invalid %s %d (nranks %d)", fn,
                      kind == OpKind::kSend || kind == OpKind::kRecv ? "peer" : "root", root, c->nranks);
      return GroupFail(ncclInvalidArgument);
    }
    const bool me_root = c->rank == root;
    bool need_send = false, need_recv = false;
    switch (kind) {
      case OpKind::kAllReduce:
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAlltoAll:
        need_send = need_recv = true;
        break;
      case OpKind::kReduce:
      case OpKind::kGather:
        need_send = true;
        need_recv = me_root;
        break;
      case OpKind::kBroadcast:
        need_send = me_root;
        need_recv = true;
        break;
      case OpKind::kScatter:
        need_send = me_root;
        need_recv = true;
        break;
      case OpKind::kSend:
        need_send = true;
        break;
      case OpKind::kRecv:
        need_recv = true;
        break;
    }
    const bool p2p = kind == OpKind::kSend || kind == OpKind::kRecv;
    if (count == 0 && !p2p) return ncclSuccess;  // nothing to do, nothing to match
    if (count > 0 && ((need_send && send == nullptr) || (need_recv && recv == nullptr))) {
      c->SetLastError("%s: %s is NULL", fn, need_send && send == nullptr ? "sendbuff" : "recvbuff");
      return GroupFail(ncclInvalidArgument);
    }
    a.kind = kind;
    a.send = send;
    a.recv = recv;
    a.count = count;
    a.type = type;
    a.root = root;
    a.comm = std::move(c);
    a.stream = stream;
    return EnqueueOp(std::move(a));
  });
}

}  // namespace

NCCL_API ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream) {
  return Operation("ncclAllReduce", OpKind::kAllReduce, sendbuff, recvbuff, count, Raw(datatype), Raw(op), 0,
                   comm, stream);
}
NCCL_ALIAS(ncclAllReduce)

NCCL_API ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  return Operation("ncclReduce", OpKind::kReduce, sendbuff, recvbuff, count, Raw(datatype), Raw(op), root,
                   comm, stream);
}
NCCL_ALIAS(ncclReduce)

NCCL_API ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream) {
  return Operation("ncclBroadcast", OpKind::kBroadcast, sendbuff, recvbuff, count, Raw(datatype), ncclSum,
                   root, comm, stream);
}
NCCL_ALIAS(ncclBroadcast)

NCCL_API ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream) {
  return Operation("ncclBcast", OpKind::kBroadcast, buff, buff, count, Raw(datatype), ncclSum, root, comm,
                   stream);
}
NCCL_ALIAS(ncclBcast)

NCCL_API ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream) {
  return Operation("ncclReduceScatter", OpKind::kReduceScatter, sendbuff, recvbuff, recvcount,
                   Raw(datatype), Raw(op), 0, comm, stream);
}
NCCL_ALIAS(ncclReduceScatter)

NCCL_API ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return Operation("ncclAllGather", OpKind::kAllGather, sendbuff, recvbuff, sendcount, Raw(datatype),
                   ncclSum, 0, comm, stream);
}
NCCL_ALIAS(ncclAllGather)

NCCL_API ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return Operation("ncclAlltoAll", OpKind::kAlltoAll, sendbuff, recvbuff, count, Raw(datatype), ncclSum, 0,
                   comm, stream);
}
NCCL_ALIAS(ncclAlltoAll)

NCCL_API ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  return Operation("ncclGather", OpKind::kGather, sendbuff, recvbuff, count, Raw(datatype), ncclSum, root,
                   comm, stream);
}
NCCL_ALIAS(ncclGather)

NCCL_API ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return Operation("ncclScatter", OpKind::kScatter, sendbuff, recvbuff, count, Raw(datatype), ncclSum, root,
                   comm, stream);
}
NCCL_ALIAS(ncclScatter)

NCCL_API ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream) {
  return Operation("ncclSend", OpKind::kSend, sendbuff, nullptr, count, Raw(datatype), ncclSum, peer, comm,
                   stream);
}
NCCL_ALIAS(ncclSend)

NCCL_API ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream) {
  return Operation("ncclRecv", OpKind::kRecv, nullptr, recvbuff, count, Raw(datatype), ncclSum, peer, comm,
                   stream);
}
NCCL_ALIAS(ncclRecv)

NCCL_API ncclResult_t pncclGroupStart() { return GroupStart(); }
NCCL_ALIAS(ncclGroupStart)

NCCL_API ncclResult_t pncclGroupEnd() {
  return Guard([] { return GroupEnd(); });
}
NCCL_ALIAS(ncclGroupEnd)

NCCL_API ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return Guard([&] { return GroupSimulateEnd(simInfo); });
}
NCCL_ALIAS(ncclGroupSimulateEnd)

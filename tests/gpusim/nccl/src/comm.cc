#include "comm.h"

#include <algorithm>

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <thread>

#include "cudart.h"
#include "hash.h"

namespace gpusim::nccl {
namespace {

std::mutex g_error_mu;
char g_last_error[1024] = "";

std::atomic<uint64_t> g_creation_ordinal{0};

std::string Hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

}  // namespace

uint64_t NextCreationOrdinal() { return g_creation_ordinal.fetch_add(1); }

void SetGlobalLastError(const char* msg) {
  std::lock_guard<std::mutex> lock(g_error_mu);
  std::snprintf(g_last_error, sizeof g_last_error, "%s", msg);
}

const char* GlobalLastError() { return g_last_error; }

ncclResult_t ReadUserConfig(const ncclConfig_t* config, int* blocking_out, const char** name_out) {
  *blocking_out = -1;
  *name_out = nullptr;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    SetGlobalLastError("config was not initialized with NCCL_CONFIG_INITIALIZER");
    return ncclInvalidArgument;
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1) {
      SetGlobalLastError("config->blocking must be 0 or 1");
      return ncclInvalidArgument;
    }
    *blocking_out = config->blocking;
  }
  if (config->size >= offsetof(ncclConfig_t, commName) + sizeof(const char*) &&
      config->commName != nullptr && config->commName[0] != '\0') {
    *name_out = config->commName;
  }
  return ncclSuccess;
}

CommCore::CommCore(const ncclConfig_t* config, int fallback_blocking) : cfg(LoadConfig()) {
  int b = -1;
  const char* n = nullptr;
  ReadUserConfig(config, &b, &n);  // validated by the caller
  blocking = b < 0 ? fallback_blocking != 0 : b != 0;
  uint64_t ordinal = NextCreationOrdinal();
  name = n != nullptr ? std::string(n) : "comm" + std::to_string(ordinal);
  if (const CudaRt* rt = GetCudaRt(); rt != nullptr && rt->GetDevice != nullptr) {
    int d = 0;
    if (rt->GetDevice(&d) == cudaSuccess) cuda_dev = d;
  }
}

CommCore::~CommCore() = default;

void CommCore::Setup(const ncclUniqueId& new_id, int new_nranks, int new_rank) {
  id = new_id;
  id_hash = IdHash(new_id);
  nranks = new_nranks;
  rank = new_rank;
  send_owner.reset(new std::atomic<void*>[static_cast<size_t>(new_nranks)]);
  recv_owner.reset(new std::atomic<void*>[static_cast<size_t>(new_nranks)]);
  for (int i = 0; i < new_nranks; ++i) {
    send_owner[i].store(nullptr);
    recv_owner[i].store(nullptr);
  }
  shm_name = cfg.shm_prefix + Hex64(id_hash);
  has_identity.store(true, std::memory_order_release);
}

bool CommCore::Stopped() const {
  if (aborted.load(std::memory_order_acquire) || revoked.load(std::memory_order_acquire)) {
    return true;
  }
  if (seg == nullptr) return false;
  const Header* h = seg->header();
  return h->aborted_by.load(std::memory_order_acquire) != 0 ||
         h->revoked_by.load(std::memory_order_acquire) != 0;
}

int CommCore::RemoteStopper() const {
  if (seg == nullptr) return -1;
  const Header* h = seg->header();
  uint32_t a = h->aborted_by.load(std::memory_order_acquire);
  if (a != 0 && static_cast<int>(a) - 1 != rank) return static_cast<int>(a) - 1;
  uint32_t r = h->revoked_by.load(std::memory_order_acquire);
  if (r != 0 && static_cast<int>(r) - 1 != rank) return static_cast<int>(r) - 1;
  return -1;
}

void CommCore::Ring() const {
  if (seg != nullptr) seg->Ring();
}

void CommCore::SetLastError(const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::snprintf(last_error_, sizeof last_error_, "%s", msg);
  }
  SetGlobalLastError(msg);
}

ncclResult_t CommCore::CreatePreMulSum(ncclRedOp_t* op, const void* scalar, int type,
                                       int residence) {
  size_t es = type >= 0 && type < ncclNumTypes ? TypeSize(static_cast<ncclDataType_t>(type)) : 0;
  if (op == nullptr || scalar == nullptr || es == 0 ||
      (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)) {
    SetLastError("ncclRedOpCreatePreMulSum: invalid argument (op %p, scalar %p, type %d, residence %d)",
                 static_cast<void*>(op), scalar, type, residence);
    return ncclInvalidArgument;
  }
  UserOp u;
  u.live = true;
  u.type = static_cast<ncclDataType_t>(type);
  u.spec.kind = RedKind::kPreMulSum;
  u.spec.scalar_immediate = residence == ncclScalarHostImmediate;
  if (u.spec.scalar_immediate) {
    std::memcpy(u.spec.scalar, scalar, es);
  } else {
    u.spec.scalar_ptr = scalar;
  }
  std::lock_guard<std::mutex> lock(mu_);
  size_t slot = 0;
  while (slot < user_ops_.size() && user_ops_[slot].live) ++slot;
  if (slot == user_ops_.size()) user_ops_.push_back(u);
  else user_ops_[slot] = u;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(slot));
  return ncclSuccess;
}

ncclResult_t CommCore::DestroyRedOp(int op) {
  int idx = op - ncclNumOps;
  std::lock_guard<std::mutex> lock(mu_);
  if (idx < 0 || static_cast<size_t>(idx) >= user_ops_.size() || !user_ops_[idx].live) {
    return ncclInvalidArgument;
  }
  user_ops_[idx].live = false;
  return ncclSuccess;
}

bool CommCore::ResolveRedOp(int op, ncclDataType_t type, RedOpSpec* spec) {
  int v = op;
  if (v >= 0 && v < ncclNumOps) {
    static constexpr RedKind kinds[] = {RedKind::kSum, RedKind::kProd, RedKind::kMax,
                                        RedKind::kMin, RedKind::kAvg};
    *spec = RedOpSpec{};
    spec->kind = kinds[v];
    spec->nranks = nranks;
    return true;
  }
  int idx = v - ncclNumOps;
  std::lock_guard<std::mutex> lock(mu_);
  if (idx < 0 || static_cast<size_t>(idx) >= user_ops_.size() || !user_ops_[idx].live ||
      user_ops_[idx].type != type) {
    return false;
  }
  *spec = user_ops_[idx].spec;
  spec->nranks = nranks;
  return true;
}

bool WaitUntil(const Segment* seg, int64_t deadline_ns, const std::function<bool()>& pred) {
  for (int spin = 0;; ++spin) {
    uint32_t bell = seg->Bell();
    if (pred()) return true;
    int64_t now = NowNs();
    if (now >= deadline_ns) return pred();
    if (spin < 64) {
      sched_yield();
    } else {
      seg->Sleep(bell, std::min<int64_t>(deadline_ns - now, 20000000));
    }
  }
}

ncclResult_t RunInit(const std::shared_ptr<CommCore>& core) {
  CommCore* c = core.get();
  for (const std::string& p : c->cfg.problems) DebugLog(c->cfg, "%s", p.c_str());
  uint64_t stall = kNoStall;
  const std::string hex = Hex64(c->id_hash);
  for (const StallRule& r : c->cfg.stalls) {
    if (r.comm == c->name || r.comm == hex) stall = std::min(stall, r.after);
  }
  for (const SlowRule& r : c->cfg.slows) {
    const bool here = r.ranks.empty() || std::find(r.ranks.begin(), r.ranks.end(), c->cfg.process_rank) != r.ranks.end();
    if (here && (r.comm == c->name || r.comm == hex)) c->slow_ms = std::max(c->slow_ms, r.ms);
  }
  Layout layout = ComputeLayout(c->nranks, c->cfg.chunk_bytes);
  std::unique_ptr<Segment> seg;
  std::string err;
  int e = Segment::Join(c->shm_name, layout, c->rank, c->cfg.init_timeout_s, stall, &c->cancel,
                        &seg, &err);
  if (e != 0) {
    ncclResult_t r = e == EINVAL || e == EEXIST ? ncclInvalidUsage : ncclSystemError;
    c->SetLastError("gpusim NCCL init of communicator %s (id %s) rank %d/%d failed: %s",
                    c->name.c_str(), hex.c_str(), c->rank, c->nranks, err.c_str());
    DebugLog(c->cfg, "%s", c->last_error());
    c->init_state.store(r, std::memory_order_release);
    return r;
  }
  c->stall_at = seg->header()->stall_at.load(std::memory_order_acquire);
  c->seg = std::move(seg);
  DebugLog(c->cfg, "init comm %s id %s rank %d/%d dev %d shm %s (%" PRIu64 " MiB)%s",
           c->name.c_str(), hex.c_str(), c->rank, c->nranks, c->cuda_dev, c->shm_name.c_str(),
           layout.total_bytes >> 20,
           c->stall_at != kNoStall
               ? (" stall after " + std::to_string(c->stall_at) + " collectives").c_str()
               : "");
  c->init_state.store(ncclSuccess, std::memory_order_release);
  if (c->cancel.load()) {  // aborted while we were joining: tell the others
    uint32_t zero = 0;
    c->seg->header()->aborted_by.compare_exchange_strong(zero, static_cast<uint32_t>(c->rank + 1));
    c->seg->Ring();
  }
  return ncclSuccess;
}

ncclResult_t SplitExchange(CommCore* parent, uint64_t exchange, int color, int key,
                           std::vector<CtrlEntry>* all) {
  // Exchanges of one parent run one at a time in ordinal order (nonblocking splits run on
  // background threads): the double-buffered entries rely on it.
  const int64_t deadline = NowNs() + static_cast<int64_t>(parent->cfg.init_timeout_s * 1e9);
  while (parent->exchanges_done.load(std::memory_order_acquire) != exchange) {
    if (NowNs() > deadline) {
      parent->SetLastError("ncclCommSplit on %s: an earlier split of this communicator never ran",
                           parent->name.c_str());
      return ncclInternalError;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  struct Done {
    CommCore* p;
    uint64_t next;
    ~Done() { p->exchanges_done.store(next, std::memory_order_release); }
  } done{parent, exchange + 1};
  Segment* seg = parent->seg.get();
  const int n = parent->nranks;
  const int b = static_cast<int>(exchange & 1);
  RankArea* me = seg->rank_area(parent->rank);
  me->ctrl[b].ordinal = static_cast<int64_t>(exchange);
  me->ctrl[b].color = color;
  me->ctrl[b].key = key;
  me->ctrl_arrive.store(exchange + 1, std::memory_order_release);
  seg->Ring();
  bool ok = WaitUntil(seg, deadline, [&] {
    if (parent->Stopped()) return true;
    for (int r = 0; r < n; ++r) {
      if (seg->rank_area(r)->ctrl_arrive.load(std::memory_order_acquire) < exchange + 1) return false;
    }
    return true;
  });
  if (parent->Stopped()) {
    parent->SetLastError("ncclCommSplit: parent communicator %s was aborted or revoked",
                         parent->name.c_str());
    return ncclRemoteError;
  }
  if (!ok) {
    std::string missing;
    for (int r = 0; r < n; ++r) {
      if (seg->rank_area(r)->ctrl_arrive.load() < exchange + 1) {
        missing += (missing.empty() ? "" : ",") + std::to_string(r);
      }
    }
    parent->SetLastError(
        "ncclCommSplit on %s: timed out after %g s waiting for parent ranks %s to call "
        "ncclCommSplit (GPUSIM_NCCL_INIT_TIMEOUT_S sets the limit)",
        parent->name.c_str(), parent->cfg.init_timeout_s, missing.c_str());
    return ncclSystemError;
  }
  all->resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    (*all)[r] = seg->rank_area(r)->ctrl[b];
    if ((*all)[r].ordinal != static_cast<int64_t>(exchange)) {
      parent->SetLastError("ncclCommSplit on %s: rank %d is at split #%" PRId64
                           ", this rank at #%" PRIu64 " (splits called in different orders)",
                           parent->name.c_str(), r, (*all)[r].ordinal, exchange);
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

}  // namespace gpusim::nccl

// The arena made ready beside the app, on the agent thread (ckpt_agent_impl.h): after
// ft_register_end returned, its data regions are reserved, their pages mapped and (device
// buffers) pinned, so the copies run at full speed and asynchronously (PrepareArena); then,
// once a step or a restore gave the process something to save, every page is touched once
// between requests (the warm-up), so that no save pays the process's first access to its pages
// — the termination save least of all, which has a grace period to fit in.
//
// Every save comes after the preparation (a snapshot falling due meanwhile waits in StepDone).
// A restore asked for by then need not wait for all of it: with two slots, the slot it uses
// is prepared first, and the restore runs before the other slot's preparation —
//   - a fresh arena (this open created it: a new node, a first start) costs the kernel's page
//     allocation for every slot (0.24 s per slot-GiB on the H200 host); a restore writes slot 0,
//     so slot 0 is reserved, mapped and pinned first;
//   - an arena that holds a copy (a rank relaunched in place) is read from the committed copy's
//     slot: that one is mapped and pinned first (0.04 s per GiB pinned on the H200 host: seconds
//     for a large rank's slot the restore does not read). Both slots are reserved before it,
//     which is quick where their blocks exist, because a restore that falls back to another
//     source writes the other slot.
// A request waits for one warm-up piece at most; a restore asked for first is served first (it
// touches what it reads).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/mutex.h"
#include "jitckpt/arena_pages.h"
#include "jitckpt/populate.h"
#include "preload/ckpt/agent_host.h"
#include "preload/ckpt/ckpt_agent.h"
#include "preload/ckpt/ckpt_agent_impl.h"

namespace ft::preload::agent {

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// 4096 pages: ~20 ms where each first access costs a hypervisor's ~5 us, well under a
// millisecond elsewhere. What a request may wait behind.
constexpr uint64_t kWarmPiece = 16ull << 20;

}  // namespace

bool Agent::PrepareArena(AgentCuda* cuda) {
  const auto start = std::chrono::steady_clock::now();
  // Every hardware thread (at most 8), as when registration did this itself: a restarted rank's
  // restore waits for it.
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  std::string pinned;
  std::string first;
  if (arena_.slot_count() > 1) {
    // The slot a restore uses: a fresh (or empty) arena's slot 0, which BeginWrite picks when no
    // copy is committed; else the committed copy's.
    const int slot = arena_.created() ? 0 : std::max(arena_.committed_slot(), 0);
    if (!arena_.created()) {
      for (int s = 0; s < arena_.slot_count(); ++s) {
        if (Status reserved = arena_.ReserveSlot(s); !reserved.ok()) return Unreserved(reserved);
      }
    }
    if (!PrepareSlots(slot, threads, &pinned)) return false;
    first = fmt::format("; slot {} first, in {:.3f} s", slot, SecondsSince(start));
    std::shared_ptr<AppRequest> restore;
    {
      MutexLock lock(&mu_);
      if (!app_requests_.empty() && app_requests_.front()->kind == AppRequest::Kind::kRestore) {
        restore = app_requests_.front();
        app_requests_.pop_front();
      }
    }
    if (restore) {
      try {
        ServeRestore(restore, cuda);
      } catch (...) {
        Failed(restore, nullptr);  // its ft_restore is answered; the preparation goes on
      }
      first += ", then the restore asked for";
    }
  }
  if (!PrepareSlots(-1, threads, &pinned)) return false;
  const std::string& path = arena_.path();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  FT_LOG(Info, Ckpt, "host arena {}: {} bytes ({} slot(s)) prepared in {:.3f} s beside the app (reserved and "
         "mapped on {} thread(s), {}{}), on {}", path, arena_.slots_bytes(), arena_.slot_count(),
         SecondsSince(start), threads, pinned, first, ckpt::ArenaPagesText(ckpt::ArenaPagesOfDir(dir.empty() ? "." : dir)));
  {
    MutexLock lock(&mu_);
    arena_prepared_ = true;
  }
  done_cv_.NotifyAll();  // an exiting process waits for this (FinishAtExit)
  return true;
}

bool Agent::Unreserved(const Status& reserved) {
  std::string message = "the host arena " + arena_.path() + " could not be reserved: " + reserved.ToString() +
                        "; training continues without checkpoints";
  FT_LOG(Warn, Ckpt, "{}", message);
  GiveUp(message, "no host arena (" + std::string(StatusCodeName(reserved.code())) + "): no checkpoints, see the rank's log",
         reserved.code());
  return false;
}

bool Agent::PrepareSlots(int slot, int threads, std::string* pinned) {
  // Ascending, so with at most two slots the ones prepared here are one contiguous range.
  std::vector<int> todo;
  for (int s = 0; s < arena_.slot_count(); ++s) {
    if ((slot < 0 || s == slot) && !arena_.slot_prepared(s)) todo.push_back(s);
  }
  static_assert(ckpt::kArenaMaxSlots <= 2, "the slots prepared at once are one range to pin");
  for (int s : todo) {
    if (Status prepared = arena_.PrepareSlot(s, threads, &stop_preparing_); !prepared.ok()) return Unreserved(prepared);
  }
  const Config& cfg = host::RuntimeConfig();
  if (device_ < 0) {
    *pinned = "not pinned (host buffers only)";
  } else if (!cfg.ckpt_pin) {
    *pinned = "not pinned (FT_CKPT_PIN=0)";
  } else if (stop_preparing_.load(std::memory_order_acquire)) {
    *pinned = "not pinned (the process began to exit)";
  } else if (!todo.empty() && !pin_failed_) {
    // A job whose state is all in host memory (a CPU-only job, python/ft's Python values) copies
    // with memcpy: pinning would only cost time, and fail without a CUDA runtime (above). Each
    // range of slots registered once, as it is prepared; after a failure the rest stays
    // unpinned too, with one warning.
    auto host_register = FT_HOST_CUDA(cudaHostRegister);
    const uint64_t begin = static_cast<uint64_t>(todo.front()) * arena_.data_capacity();
    const uint64_t end = static_cast<uint64_t>(todo.back() + 1) * arena_.data_capacity();
    cudaError_t e = host_register == nullptr
                        ? cudaErrorSharedObjectSymbolNotFound
                        : host_register(arena_.slots_data() + begin, end - begin, cudaHostRegisterDefault);
    if (e == cudaSuccess) {
      *pinned = "pinned";
    } else {
      *pinned = "not pinned";
      pin_failed_ = true;
      FT_LOG(Warn, Ckpt, "host arena {}: pinning failed ({}); saves run unpinned (slower); "
             "FT_CKPT_PIN=0 skips pinning and this warning", arena_.path(), CudaStatus(e, "cudaHostRegister").ToString());
    }
  }
  return true;
}

void Agent::StartWarmUp() {
  warm_total_ = arena_.slots_bytes();
  warm_done_ = 0;
  warm_seconds_ = 0;
  // The slot the next save writes first (Arena::BeginWrite's choice): the other one than the
  // committed copy's, when there are two.
  warm_from_ = arena_.slot_count() == 2 && arena_.committed_slot() == 0 ? arena_.data_capacity() : 0;
}

bool Agent::WarmPending() const {
  return warm_done_ < warm_total_ && !stop_preparing_.load(std::memory_order_acquire);
}

void Agent::WarmNextPiece() {
  const auto start = std::chrono::steady_clock::now();
  // Through the end of the slots region, then from its start up to where it began.
  const uint64_t at = (warm_from_ + warm_done_) % warm_total_;
  const uint64_t piece = std::min({kWarmPiece, warm_total_ - warm_done_, warm_total_ - at});
  ckpt::TouchPages(arena_.slots_data() + at, piece);
  warm_done_ += piece;
  warm_seconds_ += SecondsSince(start);
  if (warm_done_ == warm_total_) {
    FT_LOG(Info, Ckpt, "host arena {}: every page of its {} slot bytes touched in {:.3f} s, between requests",
           arena_.path(), warm_total_, warm_seconds_);
  }
}

}  // namespace ft::preload::agent

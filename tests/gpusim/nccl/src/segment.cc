#include "segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

namespace gpusim::nccl {

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex word must be 32 bits");

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

long Futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}

std::string Errno(const char* what, int e) { return std::string(what) + ": " + std::strerror(e); }

void SleepMs(int ms) {
  timespec ts{0, static_cast<long>(ms) * 1000000};
  nanosleep(&ts, nullptr);
}

}  // namespace

Layout ComputeLayout(int nranks, uint64_t requested_chunk_bytes) {
  Layout l;
  const uint64_t n = static_cast<uint64_t>(nranks);
  l.nranks = static_cast<uint32_t>(nranks);
  // A slot splits into n sub-slots of >= 64 bytes (ReduceScatter, AlltoAll, Scatter).
  l.chunk_bytes = RoundUp(std::max<uint64_t>(requested_chunk_bytes, 64 * n), 64 * n);
  // Point-to-point: n*n channels of kP2pSlots slots; cap the total near 32 MiB.
  uint64_t p2p = std::min<uint64_t>(l.chunk_bytes / kP2pSlots, (32ull << 20) / (n * n * kP2pSlots));
  l.p2p_slot_bytes = RoundUp(std::max<uint64_t>(p2p, 4096), 64);
  l.ranks_off = RoundUp(sizeof(Header), 4096);
  l.coll_off = RoundUp(l.ranks_off + n * sizeof(RankArea), 4096);
  l.chan_off = RoundUp(l.coll_off + 2 * n * l.chunk_bytes, 4096);
  l.p2p_off = RoundUp(l.chan_off + n * n * sizeof(P2pChannel), 4096);
  l.total_bytes = RoundUp(l.p2p_off + n * n * kP2pSlots * l.p2p_slot_bytes, 4096);
  return l;
}

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, layout_.total_bytes);
}

void Segment::Ring() const {
  hdr_->doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (hdr_->sleepers.load(std::memory_order_seq_cst) != 0) {
    Futex(&hdr_->doorbell, FUTEX_WAKE, INT32_MAX, nullptr);
  }
}

void Segment::Sleep(uint32_t seen, int64_t timeout_ns) const {
  if (timeout_ns <= 0) return;
  hdr_->sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (hdr_->doorbell.load(std::memory_order_seq_cst) == seen) {
    timespec ts{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
    Futex(&hdr_->doorbell, FUTEX_WAIT, seen, &ts);
  }
  hdr_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

int Segment::Join(const std::string& name, const Layout& layout, int rank, double timeout_s,
                  uint64_t stall_at, const std::atomic<bool>* cancel,
                  std::unique_ptr<Segment>* out, std::string* err) {
  const int64_t deadline = NowNs() + static_cast<int64_t>(timeout_s * 1e9);
  auto cancelled = [&] { return cancel != nullptr && cancel->load(std::memory_order_acquire); };
  std::unique_ptr<Segment> seg(new Segment());
  seg->layout_ = layout;

  // 1. Create (first comer) or open the segment, then map it.
  int fd = -1;
  bool creator = false;
  for (;;) {
    if (cancelled()) {
      *err = "cancelled (communicator aborted during init)";
      return ECANCELED;
    }
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      creator = true;
      break;
    }
    if (errno != EEXIST) {
      *err = Errno(("shm_open(" + name + ")").c_str(), errno);
      return errno;
    }
    fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd >= 0) break;
    if (errno != ENOENT) {
      *err = Errno(("shm_open(" + name + ")").c_str(), errno);
      return errno;
    }
    // Unlinked between our two opens (a previous incarnation completed or gave up): retry.
    if (NowNs() > deadline) {
      *err = "timed out opening " + name;
      return ETIMEDOUT;
    }
    SleepMs(1);
  }

  if (creator) {
    int e = 0;
    if (ftruncate(fd, static_cast<off_t>(layout.total_bytes)) != 0) {
      e = errno;
      *err = Errno("ftruncate", e);
    } else if ((e = posix_fallocate(fd, 0, static_cast<off_t>(layout.total_bytes))) != 0) {
      // Reserve tmpfs pages now: a short /dev/shm must fail here, not with SIGBUS later.
      *err = Errno(("reserving " + std::to_string(layout.total_bytes >> 20) +
                    " MiB in /dev/shm (set GPUSIM_NCCL_CHUNK_BYTES smaller or enlarge /dev/shm)")
                       .c_str(),
                   e);
    }
    if (e != 0) {
      shm_unlink(name.c_str());
      close(fd);
      return e;
    }
  } else {
    // Wait for the creator's ftruncate; the size is then either ours or a mismatch.
    for (;;) {
      struct stat st;
      if (fstat(fd, &st) != 0) {
        int e = errno;
        *err = Errno("fstat", e);
        close(fd);
        return e;
      }
      if (st.st_size != 0) {
        if (static_cast<uint64_t>(st.st_size) != layout.total_bytes) {
          *err = name + " has " + std::to_string(st.st_size) + " bytes, this member expects " +
                 std::to_string(layout.total_bytes) +
                 " (members disagree on nranks or GPUSIM_NCCL_CHUNK_BYTES)";
          close(fd);
          return EINVAL;
        }
        break;
      }
      if (NowNs() > deadline || cancelled()) {
        *err = "timed out waiting for the creator of " + name + " to size it";
        close(fd);
        return ETIMEDOUT;
      }
      SleepMs(1);
    }
  }

  void* p = mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int map_errno = errno;
  close(fd);
  if (p == MAP_FAILED) {
    *err = Errno("mmap", map_errno);
    if (creator) shm_unlink(name.c_str());
    return map_errno;
  }
  seg->base_ = static_cast<char*>(p);
  seg->hdr_ = reinterpret_cast<Header*>(p);
  Header* h = seg->hdr_;

  if (creator) {
    // The file is zero-filled: atomics start at 0. Fill in the identity, then publish.
    h->magic = kSegmentMagic;
    h->version = kLayoutVersion;
    h->nranks = layout.nranks;
    h->total_bytes = layout.total_bytes;
    h->chunk_bytes = layout.chunk_bytes;
    h->p2p_slot_bytes = layout.p2p_slot_bytes;
    h->ranks_off = layout.ranks_off;
    h->coll_off = layout.coll_off;
    h->chan_off = layout.chan_off;
    h->p2p_off = layout.p2p_off;
    h->stall_at.store(kNoStall, std::memory_order_relaxed);
    h->ready.store(kReadyMagic, std::memory_order_release);
  } else {
    while (h->ready.load(std::memory_order_acquire) != kReadyMagic) {
      if (NowNs() > deadline || cancelled()) {
        *err = "timed out waiting for the creator of " + name + " to initialize it";
        return ETIMEDOUT;
      }
      SleepMs(1);
    }
    if (h->magic != kSegmentMagic || h->version != kLayoutVersion ||
        h->nranks != layout.nranks || h->chunk_bytes != layout.chunk_bytes ||
        h->p2p_slot_bytes != layout.p2p_slot_bytes || h->total_bytes != layout.total_bytes) {
      *err = name + " was created with another layout (nranks " + std::to_string(h->nranks) +
             ", chunk " + std::to_string(h->chunk_bytes) + "; this member: nranks " +
             std::to_string(layout.nranks) + ", chunk " + std::to_string(layout.chunk_bytes) + ")";
      return EINVAL;
    }
  }

  // 2. Claim the rank, publish the stall request, count ourselves in.
  RankArea* me = seg->rank_area(rank);
  uint32_t expected = 0;
  const uint32_t pid = static_cast<uint32_t>(getpid());
  if (!me->pid.compare_exchange_strong(expected, pid)) {
    *err = "rank " + std::to_string(rank) + " is already taken by pid " +
           std::to_string(expected) + " in " + name + " (two members passed the same rank)";
    return EEXIST;
  }
  if (stall_at != kNoStall) {
    uint64_t cur = h->stall_at.load();
    while (stall_at < cur && !h->stall_at.compare_exchange_weak(cur, stall_at)) {
    }
  }
  const uint32_t n = layout.nranks;
  if (h->attached.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
    // Everyone has the mapping: the name is no longer needed, and unlinking now means a crash
    // later leaks nothing.
    shm_unlink(name.c_str());
  }
  seg->Ring();

  // 3. Wait for the others.
  for (;;) {
    uint32_t bell = seg->Bell();
    uint32_t a = h->attached.load(std::memory_order_acquire);
    if (a >= n) break;
    bool give_up = cancelled() || NowNs() > deadline;
    if (give_up) {
      // Leave, unless the last member arrived in the meantime.
      uint32_t cur = a;
      bool left = false;
      while (cur < n) {
        if (h->attached.compare_exchange_weak(cur, cur - 1, std::memory_order_acq_rel)) {
          left = true;
          break;
        }
      }
      if (!left) break;  // completed after all
      std::string missing;
      int nmissing = 0;
      for (uint32_t r = 0; r < n; ++r) {
        if (static_cast<int>(r) != rank && seg->rank_area(static_cast<int>(r))->pid.load() == 0) {
          if (nmissing < 16) missing += (missing.empty() ? "" : ",") + std::to_string(r);
          ++nmissing;
        }
      }
      if (nmissing > 16) missing += ",...";
      me->pid.store(0);
      if (cur - 1 == 0) shm_unlink(name.c_str());
      seg->Ring();
      if (cancelled()) {
        *err = "cancelled (communicator aborted during init)";
        return ECANCELED;
      }
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeout_s);
      *err = std::string("timed out after ") + secs + " s waiting for " +
             std::to_string(nmissing) + " of " + std::to_string(n) + " ranks to join (" + name +
             "; missing ranks: " + missing + "; GPUSIM_NCCL_INIT_TIMEOUT_S sets the limit)";
      return ETIMEDOUT;
    }
    int64_t left_ns = deadline - NowNs();
    seg->Sleep(bell, std::min<int64_t>(left_ns, 20000000));
  }
  *out = std::move(seg);
  return 0;
}

}  // namespace gpusim::nccl

#include "ops.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "cudart.h"

namespace gpusim::nccl {

const char* OpName(OpKind k) {
  switch (k) {
    case OpKind::kAllReduce: return "AllReduce";
    case OpKind::kReduce: return "Reduce";
    case OpKind::kBroadcast: return "Broadcast";
    case OpKind::kAllGather: return "AllGather";
    case OpKind::kReduceScatter: return "ReduceScatter";
    case OpKind::kAlltoAll: return "AlltoAll";
    case OpKind::kGather: return "Gather";
    case OpKind::kScatter: return "Scatter";
    case OpKind::kSend: return "Send";
    case OpKind::kRecv: return "Recv";
  }
  return "?";
}

namespace {

inline void CpuRelax() { __builtin_ia32_pause(); }

// One operation of a task. Parameters are immutable; the rest is per execution and reset by
// Begin() (a task captured into a CUDA graph runs again at every launch).
class Op {
 public:
  explicit Op(OpArgs a) : a_(std::move(a)) {
    c_ = a_.comm.get();
    es_ = TypeSize(a_.type);
    const Layout& l = c_->seg->layout();
    const uint64_t n = static_cast<uint64_t>(c_->nranks);
    switch (a_.kind) {
      case OpKind::kReduceScatter:
      case OpKind::kAlltoAll:
      case OpKind::kScatter:
        piece_bytes_ = l.chunk_bytes / n / 64 * 64;  // one sub-slot per destination
        break;
      default:
        piece_bytes_ = l.chunk_bytes;
    }
    round_elems_ = piece_bytes_ / es_;
    rounds_ = std::max<uint64_t>(1, (a_.count + round_elems_ - 1) / round_elems_);
    p2p_bytes_ = a_.count * es_;
    p2p_chunks_ = std::max<uint64_t>(1, (p2p_bytes_ + l.p2p_slot_bytes - 1) / l.p2p_slot_bytes);
  }

  CommCore* comm() const { return c_; }
  std::shared_ptr<CommCore> comm_ref() const { return a_.comm; }
  const Segment* segment() const { return c_->seg.get(); }
  bool done() const { return phase_ == kDone; }
  // How long a task waiting on this op may sleep: no longer than its slowed transfer lasts.
  int64_t SleepNs(int64_t longest) const {
    if (phase_ != kSlowed) return longest;
    return std::clamp<int64_t>(slow_until_ns_ - NowNs(), 0, longest);
  }

  void Begin(bool persistent) {
    persistent_ = persistent;
    phase_ = kStart;
    slow_until_ns_ = 0;
    round_ = 0;
    chunks_ = 0;
    owner_ = nullptr;
    c_->executing.fetch_add(1, std::memory_order_acq_rel);
  }

  // Moves as far as possible without waiting. True if anything changed.
  bool Step() {
    if (phase_ == kDone) return false;
    if (c_->Stopped()) {
      Finish();
      return true;
    }
    if (a_.kind == OpKind::kSend) return StepSend();
    if (a_.kind == OpKind::kRecv) return StepRecv();
    return StepCollective();
  }

  // Ends this execution (completed or stopped).
  void Finish() {
    if (phase_ == kDone) return;
    if (owner_ != nullptr) {
      owner_->store(nullptr, std::memory_order_release);
      owner_ = nullptr;
      c_->seg->Ring();  // a task of this process may be waiting for the slots
    }
    phase_ = kDone;
    if (!persistent_) c_->outstanding.fetch_sub(1, std::memory_order_acq_rel);
    c_->executing.fetch_sub(1, std::memory_order_acq_rel);
  }

 private:
  enum Phase { kStart, kCopyIn, kWait, kSlowed, kStalled, kRun, kDone };

  bool Acquire(std::atomic<void*>* slot) {
    void* expected = nullptr;
    if (!slot->compare_exchange_strong(expected, this, std::memory_order_acq_rel)) return false;
    owner_ = slot;
    return true;
  }

  bool StepCollective() {
    Segment* seg = c_->seg.get();
    bool moved = false;
    for (;;) {
      switch (phase_) {
        case kStart: {
          if (!Acquire(&c_->coll_owner)) return moved;
          seq_ = c_->coll_seq.fetch_add(1, std::memory_order_relaxed);
          stalled_ = seq_ >= c_->stall_at;
          if (stalled_) {
            DebugLog(c_->cfg, "comm %s rank %d: collective #%" PRIu64 " (%s) stalls (GPUSIM_NCCL_STALL)",
                     c_->name.c_str(), c_->rank, seq_, OpName(a_.kind));
          }
          phase_ = kCopyIn;
          moved = true;
          break;
        }
        case kCopyIn: {
          step_ = c_->coll_step.load(std::memory_order_relaxed) + 1;
          CopyIn(seg, static_cast<int>(step_ & 1));
          seg->rank_area(c_->rank)->coll_arrive.store(step_, std::memory_order_release);
          seg->Ring();
          phase_ = stalled_ ? kStalled : kWait;
          moved = true;
          break;
        }
        case kWait: {
          for (int k = 0; k < c_->nranks; ++k) {
            if (seg->rank_area(k)->coll_arrive.load(std::memory_order_acquire) < step_) return moved;
          }
          if (c_->slow_ms > 0 && round_ == 0 && slow_until_ns_ == 0) {
            // GPUSIM_NCCL_SLOW: everyone is here; the transfer itself takes longer.
            slow_until_ns_ = NowNs() + int64_t{c_->slow_ms} * 1000000;
            phase_ = kSlowed;
            moved = true;
            break;
          }
          Compute(seg, static_cast<int>(step_ & 1));
          c_->coll_step.store(step_, std::memory_order_relaxed);
          if (++round_ == rounds_) {
            Finish();
            return true;
          }
          phase_ = kCopyIn;
          moved = true;
          break;
        }
        case kSlowed: {
          if (NowNs() < slow_until_ns_) return moved;
          phase_ = kWait;  // everyone arrived already: it computes at once
          moved = true;
          break;
        }
        default:  // kStalled: arrived, never completes (until abort)
          return moved;
      }
    }
  }

  // Round `round_` covers elements [off, off + len) of the count dimension.
  size_t RoundOff() const { return static_cast<size_t>(round_) * round_elems_; }
  size_t RoundLen() const { return std::min(round_elems_, a_.count - RoundOff()); }
  const char* Send(size_t elem) const { return static_cast<const char*>(a_.send) + elem * es_; }
  char* Recv(size_t elem) const { return static_cast<char*>(a_.recv) + elem * es_; }

  void CopyIn(Segment* seg, int buf) {
    const int me = c_->rank, n = c_->nranks;
    const size_t off = RoundOff(), len = RoundLen(), bytes = len * es_;
    char* slot = seg->coll_slot(buf, me);
    switch (a_.kind) {
      case OpKind::kAllReduce:
      case OpKind::kReduce:
      case OpKind::kAllGather:
      case OpKind::kGather:
        std::memcpy(slot, Send(off), bytes);
        break;
      case OpKind::kBroadcast:
        if (me == a_.root) std::memcpy(slot, Send(off), bytes);
        break;
      case OpKind::kReduceScatter:
      case OpKind::kAlltoAll:
        for (int j = 0; j < n; ++j) {
          std::memcpy(slot + static_cast<size_t>(j) * piece_bytes_, Send(j * a_.count + off), bytes);
        }
        break;
      case OpKind::kScatter:
        if (me == a_.root) {
          for (int j = 0; j < n; ++j) {
            std::memcpy(slot + static_cast<size_t>(j) * piece_bytes_, Send(j * a_.count + off), bytes);
          }
        }
        break;
      default:
        break;
    }
  }

  void Compute(Segment* seg, int buf) {
    const int me = c_->rank, n = c_->nranks;
    const size_t off = RoundOff(), len = RoundLen(), bytes = len * es_;
    const void* srcs[kMaxInline];
    std::vector<const void*> heap;
    const void** s = srcs;
    if (n > kMaxInline) {
      heap.resize(static_cast<size_t>(n));
      s = heap.data();
    }
    switch (a_.kind) {
      case OpKind::kAllReduce:
      case OpKind::kReduce:
        if (a_.kind == OpKind::kReduce && me != a_.root) break;
        for (int k = 0; k < n; ++k) s[k] = seg->coll_slot(buf, k);
        ReduceInto(Recv(off), s, n, len, a_.type, a_.red);
        break;
      case OpKind::kReduceScatter:
        for (int k = 0; k < n; ++k) s[k] = seg->coll_slot(buf, k) + static_cast<size_t>(me) * piece_bytes_;
        ReduceInto(Recv(off), s, n, len, a_.type, a_.red);
        break;
      case OpKind::kBroadcast:
        std::memmove(Recv(off), seg->coll_slot(buf, a_.root), bytes);
        break;
      case OpKind::kAllGather:
      case OpKind::kGather:
        if (a_.kind == OpKind::kGather && me != a_.root) break;
        for (int k = 0; k < n; ++k) {
          std::memmove(Recv(k * a_.count + off), seg->coll_slot(buf, k), bytes);
        }
        break;
      case OpKind::kAlltoAll:
        for (int k = 0; k < n; ++k) {
          std::memmove(Recv(k * a_.count + off),
                       seg->coll_slot(buf, k) + static_cast<size_t>(me) * piece_bytes_, bytes);
        }
        break;
      case OpKind::kScatter:
        std::memmove(Recv(off), seg->coll_slot(buf, a_.root) + static_cast<size_t>(me) * piece_bytes_,
                     bytes);
        break;
      default:
        break;
    }
  }

  bool StepSend() {
    Segment* seg = c_->seg.get();
    P2pChannel* ch = seg->channel(c_->rank, a_.root);
    bool moved = false;
    if (phase_ == kStart) {
      if (!Acquire(&c_->send_owner[a_.root])) return false;
      message_ = ch->sends_begun.fetch_add(1, std::memory_order_relaxed) + 1;
      phase_ = c_->slow_ms > 0 ? kWait : kRun;
      moved = true;
    }
    if (phase_ == kWait) {
      // GPUSIM_NCCL_SLOW on a send: once the receiver is there, the transfer takes slow_ms
      // longer. The chunks are posted only then, so both ends wait it out.
      if (ch->recvs_begun.load(std::memory_order_acquire) < message_) return moved;
      slow_until_ns_ = NowNs() + int64_t{c_->slow_ms} * 1000000;
      phase_ = kSlowed;
    }
    if (phase_ == kSlowed) {
      if (NowNs() < slow_until_ns_) return moved;
      phase_ = kRun;
    }
    const uint64_t slot_bytes = seg->layout().p2p_slot_bytes;
    while (chunks_ < p2p_chunks_) {
      const uint64_t h = ch->head.load(std::memory_order_relaxed);
      const uint64_t t = ch->tail.load(std::memory_order_acquire);
      if (h - t >= kP2pSlots) break;
      const int slot = static_cast<int>(h % kP2pSlots);
      const uint64_t off = chunks_ * slot_bytes;
      const uint64_t len = std::min(slot_bytes, p2p_bytes_ - off);
      if (len > 0) std::memcpy(seg->p2p_slot(c_->rank, a_.root, slot), Send(0) + off, len);
      ch->slot[slot].msg_bytes = p2p_bytes_;
      ch->slot[slot].chunk_bytes = len;
      ch->head.store(h + 1, std::memory_order_release);
      ++chunks_;
      moved = true;
    }
    if (moved) seg->Ring();
    if (chunks_ == p2p_chunks_) Finish();
    return moved;
  }

  bool StepRecv() {
    Segment* seg = c_->seg.get();
    P2pChannel* ch = seg->channel(a_.root, c_->rank);
    bool moved = false;
    if (phase_ == kStart) {
      if (!Acquire(&c_->recv_owner[a_.root])) return false;
      phase_ = kRun;
      msg_chunks_ = 0;
      ch->recvs_begun.fetch_add(1, std::memory_order_release);
      seg->Ring();  // a slowed sender may be waiting for this receiver
      moved = true;
    }
    const uint64_t slot_bytes = seg->layout().p2p_slot_bytes;
    while (msg_chunks_ == 0 || chunks_ < msg_chunks_) {
      const uint64_t t = ch->tail.load(std::memory_order_relaxed);
      const uint64_t h = ch->head.load(std::memory_order_acquire);
      if (h == t) break;
      const int slot = static_cast<int>(t % kP2pSlots);
      const P2pSlotHeader hdr = ch->slot[slot];
      if (msg_chunks_ == 0) {
        // The sender's size decides how many chunks this message has, so a size mismatch
        // cannot desynchronise later messages on this pair.
        msg_chunks_ = std::max<uint64_t>(1, (hdr.msg_bytes + slot_bytes - 1) / slot_bytes);
        if (hdr.msg_bytes != p2p_bytes_) {
          c_->async_error.store(ncclInvalidUsage);
          c_->SetLastError("ncclRecv on %s rank %d from %d: expected %" PRIu64
                           " bytes, the sender sent %" PRIu64,
                           c_->name.c_str(), c_->rank, a_.root, p2p_bytes_, hdr.msg_bytes);
        }
      }
      const uint64_t off = chunks_ * slot_bytes;
      if (off < p2p_bytes_) {
        const uint64_t len = std::min(hdr.chunk_bytes, p2p_bytes_ - off);
        std::memcpy(Recv(0) + off, seg->p2p_slot(a_.root, c_->rank, slot), len);
      }
      ch->tail.store(t + 1, std::memory_order_release);
      ++chunks_;
      moved = true;
    }
    if (moved) seg->Ring();
    if (msg_chunks_ != 0 && chunks_ == msg_chunks_) Finish();
    return moved;
  }

  static constexpr int kMaxInline = 64;

  const OpArgs a_;
  CommCore* c_ = nullptr;
  size_t es_ = 0;
  uint64_t piece_bytes_ = 0;  // bytes of one rank's contribution per round (per destination)
  size_t round_elems_ = 0;
  uint64_t rounds_ = 0;
  uint64_t p2p_bytes_ = 0, p2p_chunks_ = 0;
  uint64_t message_ = 0;  // a send's ordinal on its channel, 1-based

  // Per execution.
  bool persistent_ = false;
  Phase phase_ = kDone;
  uint64_t seq_ = 0, step_ = 0, round_ = 0;
  bool stalled_ = false;
  int64_t slow_until_ns_ = 0;  // GPUSIM_NCCL_SLOW: when this collective's transfer may end
  uint64_t chunks_ = 0, msg_chunks_ = 0;
  std::atomic<void*>* owner_ = nullptr;
};

// The ops of one stream from one submission; the host function's userData.
struct Task {
  std::vector<std::unique_ptr<Op>> ops;
  bool persistent = false;  // captured into a graph: runs at every launch, never freed
};

constexpr int kSpinPasses = 50;    // pause-spin passes before yielding
constexpr int kYieldPasses = 20;   // sched_yield passes before sleeping on the doorbell

void CUDART_CB RunTask(void* user) {
  Task* t = static_cast<Task*>(user);
  try {
    for (auto& op : t->ops) op->Begin(t->persistent);
    const size_t nops = t->ops.size();
    std::vector<uint32_t> bells(nops);
    bool multi_segment = false;
    for (size_t i = 1; i < nops; ++i) {
      if (t->ops[i]->segment() != t->ops[0]->segment()) multi_segment = true;
    }
    int idle = 0;
    for (;;) {
      for (size_t i = 0; i < nops; ++i) bells[i] = t->ops[i]->segment()->Bell();
      bool moved = false;
      size_t waiting = nops;  // the first op still running
      for (size_t i = 0; i < nops; ++i) {
        Op& op = *t->ops[i];
        if (op.done()) continue;
        moved |= op.Step();
        if (!op.done() && waiting == nops) waiting = i;
      }
      if (waiting == nops) break;
      if (moved) {
        idle = 0;
        continue;
      }
      ++idle;
      if (idle <= kSpinPasses) {
        for (int i = 0; i < 64; ++i) CpuRelax();
      } else if (idle <= kSpinPasses + kYieldPasses) {
        sched_yield();
      } else {
        // Every state change rings the doorbell of the segment it happened in, including a
        // local or remote abort, so a long sleep loses nothing. With several communicators in
        // one task we can sleep on only one of them: poll the others every millisecond.
        int64_t sleep_ns = multi_segment ? 1000000 : 200000000;
        for (size_t i = 0; i < nops; ++i) {
          if (!t->ops[i]->done()) sleep_ns = t->ops[i]->SleepNs(sleep_ns);
        }
        t->ops[waiting]->segment()->Sleep(bells[waiting], sleep_ns);
      }
    }
  } catch (...) {
    for (auto& op : t->ops) op->Finish();
  }
  if (!t->persistent) delete t;
}

// ---- background launcher -------------------------------------------------------------------
struct Launcher {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool running = false;
};
Launcher* g_launcher = new Launcher();

void LauncherLoop(Launcher* l) {
  std::unique_lock<std::mutex> lock(l->mu);
  for (;;) {
    l->cv.wait(lock, [&] { return !l->queue.empty(); });
    std::function<void()> fn = std::move(l->queue.front());
    l->queue.pop_front();
    lock.unlock();
    try {
      fn();
    } catch (...) {
    }
    lock.lock();
  }
}

void AfterForkInChild() {
  // The launcher thread does not exist in the child; its mutex may be held. Start afresh
  // (the old object leaks).
  g_launcher = new Launcher();
}

[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, AfterForkInChild);

// Enqueues the host functions of prepared tasks. Returns the first error.
ncclResult_t LaunchTasks(const CudaRt* rt, std::vector<std::pair<cudaStream_t, Task*>>& tasks) {
  ncclResult_t result = ncclSuccess;
  for (auto& [stream, task] : tasks) {
    cudaError_t e = rt->LaunchHostFunc(stream, RunTask, task);
    if (e != cudaSuccess) {
      CommCore* c = task->ops.front()->comm();
      c->SetLastError("cudaLaunchHostFunc failed on stream %p: %s (%d)", static_cast<void*>(stream),
                      rt->GetErrorString ? rt->GetErrorString(e) : "?", static_cast<int>(e));
      for (auto& op : task->ops) {
        if (!task->persistent) op->comm()->outstanding.fetch_sub(1);
      }
      delete task;
      result = ncclUnhandledCudaError;
    }
  }
  return result;
}

}  // namespace

void RunOnLauncher(std::function<void()> fn) {
  Launcher* l = g_launcher;
  std::lock_guard<std::mutex> lock(l->mu);
  l->queue.push_back(std::move(fn));
  if (!l->running) {
    l->running = true;
    std::thread(LauncherLoop, l).detach();
  }
  l->cv.notify_one();
}

ncclResult_t Submit(std::vector<OpArgs>&& ops) {
  if (ops.empty()) return ncclSuccess;
  const char* why = nullptr;
  const CudaRt* rt = GetCudaRt(&why);
  if (rt == nullptr) {
    ops.front().comm->SetLastError("gpusim NCCL: %s", why);
    return ncclSystemError;
  }
  // One task per stream, streams in order of first use, ops in call order.
  std::vector<std::pair<cudaStream_t, Task*>> tasks;
  bool nonblocking = false;
  for (OpArgs& a : ops) {
    nonblocking |= !a.comm->blocking;
    auto it = std::find_if(tasks.begin(), tasks.end(), [&](auto& p) { return p.first == a.stream; });
    if (it == tasks.end()) {
      Task* t = new Task();
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      if (rt->StreamIsCapturing != nullptr && rt->StreamIsCapturing(a.stream, &st) == cudaSuccess) {
        t->persistent = st != cudaStreamCaptureStatusNone;
      }
      tasks.emplace_back(a.stream, t);
      it = tasks.end() - 1;
    }
    if (!it->second->persistent) a.comm->outstanding.fetch_add(1, std::memory_order_acq_rel);
    it->second->ops.push_back(std::make_unique<Op>(std::move(a)));
  }
  if (!nonblocking) return LaunchTasks(rt, tasks);

  // Nonblocking communicators: return now, enqueue from the launcher thread; until then
  // ncclCommGetAsyncError reports ncclInProgress.
  std::vector<std::shared_ptr<CommCore>> comms;
  for (auto& [stream, task] : tasks) {
    for (auto& op : task->ops) {
      CommCore* c = op->comm();
      if (std::none_of(comms.begin(), comms.end(), [&](auto& p) { return p.get() == c; })) {
        comms.push_back(op->comm_ref());  // alive until the decrement below
      }
    }
  }
  for (auto& c : comms) c->in_progress.fetch_add(1, std::memory_order_acq_rel);
  RunOnLauncher([rt, tasks = std::move(tasks), comms]() mutable {
    // GPUSIM_NCCL_LAUNCH_DELAY_MS: the work stays ncclInProgress a while (until an abort).
    int delay_ms = 0;
    for (auto& c : comms) delay_ms = std::max(delay_ms, c->cfg.launch_delay_ms);
    for (int waited = 0; waited < delay_ms; ++waited) {
      if (std::any_of(comms.begin(), comms.end(), [](auto& c) { return c->Stopped(); })) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<CommCore*> raw;
    for (auto& c : comms) raw.push_back(c.get());
    ncclResult_t r = LaunchTasks(rt, tasks);
    for (CommCore* c : raw) {
      if (r != ncclSuccess) c->async_error.store(r);
      c->in_progress.fetch_sub(1, std::memory_order_acq_rel);
    }
  });
  return ncclInProgress;
}

}  // namespace gpusim::nccl

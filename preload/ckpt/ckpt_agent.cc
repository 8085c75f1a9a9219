// The app-facing half of the checkpoint agent (ckpt_agent_impl.h): registration and the
// host arena, ft_update_begin's marker, ft_step_done's periodic saves, ft_restore's plan.
#include "preload/ckpt/ckpt_agent.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "include/ft/ft.h"
#include "preload/ckpt/agent_host.h"
#include "preload/ckpt/ckpt_agent_impl.h"

namespace ft::preload::agent {

Agent& TheAgent() {
  static Agent* agent = new Agent;
  return *agent;
}

namespace {

bool ValidName(const char* name, std::string* why) {
  if (name == nullptr || name[0] == '\0') {
    *why = "ft_register: the name is null or empty";
    return false;
  }
  if (strnlen(name, ckpt::kMaxBufferName + 1) > ckpt::kMaxBufferName) {
    *why = "ft_register: a name is longer than 255 bytes";
    return false;
  }
  return true;
}

// FT_CKPT_ARENA_SLOTS: 1 or 2; anything else is said once and taken as the default, 2.
int ArenaSlots(const Config& cfg) {
  if (cfg.ckpt_arena_slots == 1 || cfg.ckpt_arena_slots == 2) return static_cast<int>(cfg.ckpt_arena_slots);
  FT_LOG(Warn, Ckpt, "FT_CKPT_ARENA_SLOTS={} is neither 1 nor 2; the arena holds 2 copies",
         cfg.ckpt_arena_slots);
  return 2;
}

// At exit(), before libft.so's own handler (registered at Init, so it runs after this one)
// marks the segment exited: glibc's on_exit passes the exit status (an atexit handler cannot
// see it); elsewhere the status reads 0 and a failing exit saves nothing.
#if defined(__GLIBC__)
void FinishAtExitWithStatus(int status, void*) { TheAgent().FinishAtExit(status); }
#endif
void FinishAtExitNoStatus() { TheAgent().FinishAtExit(0); }

void RegisterExitHandler() {
#if defined(__GLIBC__)
  if (on_exit(FinishAtExitWithStatus, nullptr) == 0) return;
#endif
  atexit(FinishAtExitNoStatus);
}

}  // namespace

int Fail(int result, std::string message) {
  SetLastError(std::move(message));
  return result;
}

int Agent::SetShard(int tp, int pp, int dp) {
  if (tp < -1 || pp < -1 || dp < -1) {
    return Fail(FT_INVALID_ARGUMENT, "ft_set_shard: indices are >= 0, or -1 for unknown");
  }
  MutexLock lock(&mu_);
  if (phase_ != Phase::kOpen) {
    return Fail(FT_INVALID_ARGUMENT, "ft_set_shard after ft_register_end: call it before");
  }
  tp_ = tp;
  pp_ = pp;
  dp_ = dp;
  return FT_OK;
}

int Agent::Register(const char* name, const void* ptr, size_t bytes) {
  std::string why;
  if (!ValidName(name, &why)) return Fail(FT_INVALID_ARGUMENT, why);
  if (ptr == nullptr) return Fail(FT_INVALID_ARGUMENT, std::string("ft_register '") + name + "': null pointer");
  if (bytes == 0) return Fail(FT_INVALID_ARGUMENT, std::string("ft_register '") + name + "': zero bytes");
  Registered r;
  r.name = name;
  r.ptr = static_cast<uint8_t*>(const_cast<void*>(ptr));
  r.bytes = bytes;
  // Where the memory lives decides how it is copied. Without a runtime it is host memory.
  if (auto attributes = FT_HOST_CUDA(cudaPointerGetAttributes)) {
    AppCuda cuda;
    cudaPointerAttributes a{};
    cudaError_t e = cuda.Check(attributes(&a, ptr));
    if (e != cudaSuccess) {
      return Fail(FT_CUDA_ERROR, "ft_register '" + r.name + "': " +
                                     CudaStatus(e, "cudaPointerGetAttributes").ToString());
    }
    if (a.type == cudaMemoryTypeDevice) {
      r.where = Registered::Where::kDevice;
      r.device = a.device;
    } else if (a.type == cudaMemoryTypeManaged) {
      r.where = Registered::Where::kManaged;
      r.device = a.device;
    }
  }
  MutexLock lock(&mu_);
  if (phase_ != Phase::kOpen) {
    return Fail(FT_INVALID_ARGUMENT, "ft_register '" + r.name + "' after ft_register_end");
  }
  for (const Registered& b : buffers_) {
    if (b.name == r.name) return Fail(FT_INVALID_ARGUMENT, "ft_register: duplicate name '" + r.name + "'");
    // One device per rank: the agent copies on one stream of one device.
    if (r.where != Registered::Where::kHost && b.where != Registered::Where::kHost &&
        b.device != r.device) {
      return Fail(FT_INVALID_ARGUMENT, "ft_register '" + r.name + "': on device " +
                                           std::to_string(r.device) + ", but '" + b.name +
                                           "' is on device " + std::to_string(b.device) +
                                           " (one device per rank)");
    }
  }
  buffers_.push_back(std::move(r));
  NoteRegistration();
  return FT_OK;
}

int Agent::RegisterEnd() {
  std::vector<Registered> buffers;
  int tp, pp, dp;
  {
    MutexLock lock(&mu_);
    // Another thread is ending registration: wait for it (start-up, seconds at most).
    done_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return phase_ != Phase::kEnding; });
    switch (phase_) {
      case Phase::kReady:
      case Phase::kEmpty: return FT_OK;
      case Phase::kNoArena: return Fail(FT_NO_SPACE, arena_error_);
      default: break;
    }
    if (buffers_.empty()) {
      phase_ = Phase::kEmpty;
      return FT_OK;
    }
    phase_ = Phase::kEnding;
    buffers = buffers_;
    tp = tp_;
    pp = pp_;
    dp = dp_;
  }
  try {
    return OpenArena(std::move(buffers), tp, pp, dp);
  } catch (...) {
    GiveUp("ft_register_end: internal error; training continues without checkpoints",
           "checkpoint agent: internal error at registration", StatusCode::kInternal);
    return Fail(FT_INTERNAL, "ft_register_end: internal error (a bug in ft)");
  }
}

// kNoArena from now on; the save commands queued meanwhile are answered.
void Agent::GiveUp(const std::string& message, const std::string& ack, StatusCode code) {
  std::vector<uint64_t> queued;
  {
    MutexLock lock(&mu_);
    phase_ = Phase::kNoArena;
    arena_error_ = message;
    arena_ack_ = ack;
    queued.swap(jit_waiting_);
    queued.insert(queued.end(), at_step_waiting_.begin(), at_step_waiting_.end());
    at_step_waiting_.clear();
    // The app threads waiting on a request the agent thread will never take (it gave up
    // preparing the arena) are answered with the reason.
    for (const std::shared_ptr<AppRequest>& r : app_requests_) {
      r->outcome.result = FT_NO_SPACE;
      r->outcome.message = message;
      r->copied = true;
      r->finished = true;
    }
    app_requests_.clear();
    term_requested_ = false;  // a termination save waiting for it fails now, not at its grace
  }
  done_cv_.NotifyAll();
  for (uint64_t seq : queued) AckNow(seq, code, ack);
}

int Agent::OpenArena(std::vector<Registered> buffers, int tp, int pp, int dp) {
  const Config& cfg = host::RuntimeConfig();
  const LauncherIdentity& id = host::Identity();
  std::vector<ckpt::BufferEntry> named, laid_out;
  for (const Registered& b : buffers) named.push_back({b.name, b.bytes, 0});
  uint64_t data_bytes = 0;
  Status planned = ckpt::PlanLayout(named, &laid_out, &data_bytes);
  ckpt::Manifest base;
  ckpt::Arena arena;
  Status opened = planned;
  int rank = std::max(id.rank, 0);  // a process no launcher numbered is rank 0 of its own
  if (planned.ok()) {
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].offset = laid_out[i].offset;
    base.job = id.job;
    base.rank = rank;
    base.world_size = id.world_size;
    base.tp = tp;
    base.pp = pp;
    base.dp = dp;
    base.chunk_bytes = cfg.ckpt_chunk > 0 ? cfg.ckpt_chunk : ckpt::kDefaultChunkBytes;
    base.data_bytes = data_bytes;
    base.buffers = laid_out;
    opened = ckpt::Arena::OpenForWrite(
        cfg.ckpt_arena_dir, id.job, rank,
        ckpt::ManifestCapacity(laid_out, data_bytes, base.chunk_bytes), data_bytes, ArenaSlots(cfg), &arena,
        ckpt::ArenaPrep::kByWriter);  // reserved, mapped and pinned by the agent thread (PrepareArena)
  }
  if (!opened.ok()) {
    std::string message = "ft_register_end: no host arena for " + std::to_string(data_bytes) +
                          " bytes: " + opened.ToString() +
                          "; training continues without checkpoints";
    FT_LOG(Warn, Ckpt, "{}", message);
    GiveUp(message,
           "no host arena for " + std::to_string(data_bytes) + " bytes (" +
               StatusCodeName(opened.code()) + "): no checkpoints, see the rank's log",
           opened.code());
    return Fail(FT_NO_SPACE, message);
  }
  int device = -1;
  bool has_host = false;
  for (const Registered& b : buffers) {
    if (b.where != Registered::Where::kHost) device = b.device;
    if (b.where == Registered::Where::kHost) has_host = true;
  }
  {
    MutexLock lock(&mu_);
    buffers_ = std::move(buffers);
    base_ = std::move(base);
    arena_ = std::move(arena);
    device_ = device;
    has_host_buffers_ = has_host;
    has_device_buffers_ = device >= 0;
    phase_ = Phase::kReady;
  }
  done_cv_.NotifyAll();
  static std::once_flag exit_handler;
  std::call_once(exit_handler, [] {
    RegisterExitHandler();
    InstallTerminateSave();
  });
  // From now on a termination signal saves first (FT_CKPT_ON_SIGNAL, armed when libft.so
  // became active: until now it only marked the segment).
  std::vector<int> signals;
  Status parsed = host::ParseTerminationSignals(cfg.ckpt_on_signal, &signals);
  if (parsed.ok()) {
    // For the worker: a stop it sends waits for this save before SIGKILL (shm/layout.h).
    if (!signals.empty() && host::Segment()) {
      const auto grace_ms = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.ckpt_term_grace).count();
      host::Segment()->header()->term_grace_ms.store(
          static_cast<uint32_t>(std::clamp<int64_t>(grace_ms, 0, UINT32_MAX)), std::memory_order_relaxed);
    }
  } else {
    FT_LOG(Warn, Ckpt, "{}: no save at termination", parsed.message());
  }
  try {
    std::thread([this] { Run(); }).detach();
  } catch (...) {
    // Short of resource exhaustion this cannot happen; nothing would answer the commands.
    std::string message = "ft_register_end: cannot start the checkpoint thread; training "
                          "continues without checkpoints";
    FT_LOG(Warn, Ckpt, "{}", message);
    GiveUp(message, "no checkpoint thread in this process", StatusCode::kInternal);
    return Fail(FT_INTERNAL, message);
  }
  return FT_OK;
}

namespace {

// The event of `device` in `events`, made on first use (disabled timing) and kept for the life
// of the process; null when the device is out of range or the runtime refuses. Two threads
// racing here keep one event and destroy the other.
cudaEvent_t LazyDeviceEvent(std::atomic<cudaEvent_t>* events, int device, AppCuda* cuda) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  cudaEvent_t e = events[device].load(std::memory_order_acquire);
  if (e != nullptr) return e;
  auto create = FT_HOST_CUDA(cudaEventCreateWithFlags);
  if (create == nullptr || cuda->Check(create(&e, cudaEventDisableTiming)) != cudaSuccess) return nullptr;
  cudaEvent_t expected = nullptr;
  if (!events[device].compare_exchange_strong(expected, e)) {
    if (auto destroy = FT_HOST_CUDA(cudaEventDestroy)) cuda->Check(destroy(e));
    return expected;
  }
  return e;
}

}  // namespace

cudaEvent_t Agent::UpdateEventFor(int device, AppCuda* cuda) { return LazyDeviceEvent(device_events_, device, cuda); }

cudaEvent_t Agent::StepEventFor(int device, AppCuda* cuda) { return LazyDeviceEvent(step_events_, device, cuda); }

cudaEvent_t Agent::RecordStepEnd() {
  if (!host::Started() || !host::RuntimeConfig().ckpt_async) return nullptr;
  cudaStream_t stream = update_stream_.load(std::memory_order_acquire);
  // Checked again: the app may have begun capturing a graph on it since ft_update_begin.
  if (stream == nullptr || !host::MayRecordInto(stream)) return nullptr;
  AppCuda cuda;
  int device = -1;
  auto get_device = FT_HOST_CUDA(cudaGetDevice);
  auto record = FT_HOST_CUDA(cudaEventRecord);
  if (get_device == nullptr || record == nullptr || FT_HOST_CUDA(cudaStreamWaitEvent) == nullptr ||
      cuda.Check(get_device(&device)) != cudaSuccess) {
    return nullptr;
  }
  cudaEvent_t e = StepEventFor(device, &cuda);
  if (e == nullptr || cuda.Check(record(e, stream)) != cudaSuccess) return nullptr;
  return e;
}

void Agent::WaitSnapshotLanded() {
  const uint64_t issued = snapshots_issued_.load(std::memory_order_acquire);
  if (snapshots_landed_.load(std::memory_order_acquire) >= issued) return;
  MutexLock lock(&mu_);
  done_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return snapshots_landed_.load(std::memory_order_acquire) >= issued; });
}

void Agent::SkippedLocked(int64_t step) {
  ++skipped_total_;
  ++skipped_since_save_;
  ++skipped_since_log_;
  // At most one line a minute: with FT_CKPT_EVERY=1 and steps shorter than a snapshot, every
  // other step skips.
  const uint64_t now = host::NowNs();
  if (skip_logged_ns_ != 0 && now - skip_logged_ns_ < 60ull * 1000000000ull) return;
  FT_LOG(Info, Ckpt,
         "periodic snapshot of step {} skipped: the previous one still copies or checksums ({} skipped "
         "since the last such line, {} in all); the next due step after it ends is taken",
         step, skipped_since_log_, skipped_total_);
  skip_logged_ns_ = now;
  skipped_since_log_ = 0;
}

int Agent::UpdateBegin(cudaStream_t stream) {
  updates_entering_.fetch_add(1, std::memory_order_seq_cst);
  if (HeldNow()) {
    updates_entering_.fetch_sub(1, std::memory_order_seq_cst);
    WaitWhileTermHold();
    updates_entering_.fetch_add(1, std::memory_order_seq_cst);
  }
  struct Entered {
    std::atomic<int>* n;
    ~Entered() { n->fetch_sub(1, std::memory_order_seq_cst); }
  } entered{&updates_entering_};
  // Counted once it opens: one that waited out a termination save's copy did not overlap it.
  update_windows_.fetch_add(1, std::memory_order_acq_rel);
  cudaEvent_t marked = nullptr;
  // A snapshot whose copies may still run: the optimizer's stream waits for them, before
  // anything else is queued on it (its update marker included).
  const cudaEvent_t snapshot = snapshot_copied_.load(std::memory_order_acquire);
  bool ordered = snapshot == nullptr;
  if (stream != nullptr && host::MayRecordInto(stream)) {
    AppCuda cuda;
    if (snapshot != nullptr) {
      auto wait = FT_HOST_CUDA(cudaStreamWaitEvent);
      ordered = wait != nullptr && cuda.Check(wait(stream, snapshot, 0)) == cudaSuccess;
    }
    int device = -1;
    auto get_device = FT_HOST_CUDA(cudaGetDevice);
    auto record = FT_HOST_CUDA(cudaEventRecord);
    if (get_device != nullptr && record != nullptr &&
        cuda.Check(get_device(&device)) == cudaSuccess) {
      cudaEvent_t e = UpdateEventFor(device, &cuda);
      if (e != nullptr && cuda.Check(record(e, stream)) == cudaSuccess) marked = e;
      int64_t before = last_step_.load(std::memory_order_acquire);
      if (before == kNoStep) before = restored_step_.load(std::memory_order_acquire);
      markers_.Record(StepMarkers::Kind::kUpdateBegin, before, stream, device, &cuda);
    } else {
      markers_.Skip();
    }
    update_device_.store(device, std::memory_order_release);
    update_stream_.store(stream, std::memory_order_release);
  } else {
    if (stream == nullptr) {
      markers_.Forget();  // the app no longer says where its update runs
    } else {
      markers_.Skip();  // captured into a graph: it runs at a time no marker places
    }
    update_stream_.store(nullptr, std::memory_order_release);
  }
  // No stream to order: the host waits for the copies (what ft_step_done used to do).
  if (!ordered) WaitSnapshotLanded();
  if (snapshot != nullptr) snapshot_orders_.fetch_add(1, std::memory_order_acq_rel);
  update_event_.store(marked, std::memory_order_release);
  update_open_.store(true, std::memory_order_release);
  return FT_OK;
}

// Asked when every chunk of a just-in-time save has landed: the copy holds the last step's
// state unless the optimizer's device work may have begun.
bool Agent::TornNow() {
  if (!update_open_.load(std::memory_order_acquire)) return false;
  cudaEvent_t e = update_event_.load(std::memory_order_acquire);
  if (e == nullptr) return true;
  auto query = FT_HOST_CUDA(cudaEventQuery);
  return query == nullptr || query(e) != cudaErrorNotReady;
}

bool Agent::NothingToSaveYet() const {
  return last_step_.load(std::memory_order_acquire) == kNoStep &&
         restored_step_.load(std::memory_order_acquire) == kNoStep;
}

int64_t Agent::StepLabel() const {
  int64_t step = last_step_.load(std::memory_order_acquire);
  if (step != kNoStep) return step;
  step = restored_step_.load(std::memory_order_acquire);
  return step != kNoStep ? step : 0;
}

int Agent::StepDone(int64_t step) {
  // The step's end on the device, before anything here says the step is done: a save that
  // sees the step must also find its marker.
  if (cudaStream_t stream = update_stream_.load(std::memory_order_acquire); stream != nullptr) {
    if (host::MayRecordInto(stream)) {
      AppCuda cuda;
      markers_.Record(StepMarkers::Kind::kStepEnd, step, stream, update_device_.load(std::memory_order_acquire),
                      &cuda);
    } else {
      markers_.Skip();
    }
  }
  const uint64_t now_ns = host::NowNs();
  const uint64_t previous_ns = last_step_done_ns_.exchange(now_ns, std::memory_order_acq_rel);
  if (previous_ns != 0) step_interval_ns_.store(now_ns - previous_ns, std::memory_order_relaxed);
  last_step_.store(step, std::memory_order_release);
  // For the worker: the step this process reached (after a clean exit, the job's end).
  if (host::Started() && host::Segment() && step >= 0) {
    host::Segment()->header()->app_step_plus1.store(step + 1, std::memory_order_relaxed);
  }
  steps_done_.fetch_add(1, std::memory_order_acq_rel);
  update_open_.store(false, std::memory_order_release);
  host::NoteStepDone();  // a rank that handled a termination signal and trains on
  KeepTerminateSave();
  Phase phase;
  {
    MutexLock lock(&mu_);
    phase = phase_;
  }
  if (phase == Phase::kOpen || phase == Phase::kEnding) {
    if (int r = RegisterEnd(); r != FT_OK) return r;
  }
  int64_t every = host::RuntimeConfig().ckpt_every;
  MutexLock lock(&mu_);
  if (phase_ == Phase::kNoArena) return Fail(FT_NO_SPACE, arena_error_);
  if (phase_ != Phase::kReady) return FT_OK;
  bool due = (every > 0 && step % every == 0) || !at_step_waiting_.empty();
  // A signal's one step more is saved by the termination itself (ckpt_agent_term.cc): a
  // snapshot would begin writing its slot before the device reached the step, which a device
  // stuck behind a peer that is gone never does.
  if (!due || term_one_step_more_) return FT_OK;
  // The agent thread still prepares the arena (reserves, maps and pins it since
  // ft_register_end): a due snapshot waits for it, so the step asked for is saved; only what
  // the app's own start-up did not already cover is waited (docs/checkpoints.md).
  done_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return arena_prepared_ || phase_ != Phase::kReady; });
  if (phase_ == Phase::kNoArena) return Fail(FT_NO_SPACE, arena_error_);
  // A snapshot that never blocks the host, when the app told us its stream. The previous one
  // still running (copies or checksums): this one is skipped, never waited for — its slot is
  // the only one not committed, and waiting would block the host for the rest of a copy and
  // its checksums every step (docs/checkpoints.md).
  cudaEvent_t after = nullptr;
  if (update_stream_.load(std::memory_order_acquire) != nullptr && host::RuntimeConfig().ckpt_async) {
    // Once it commits, the next is queued (the agent thread takes it right after).
    if (saving_ && !committing_) {
      SkippedLocked(step);
      return FT_OK;
    }
    lock.Unlock();
    after = RecordStepEnd();
    lock.Lock();
    if (after != nullptr && saving_ && !committing_) {
      SkippedLocked(step);  // a just-in-time save began meanwhile
      return FT_OK;
    }
  }
  if (after == nullptr && has_device_buffers_) {
    // A blocking save copies at once: the step's work must have ended on the device first.
    lock.Unlock();
    WaitStepOnDevice(step);
    lock.Lock();
  }
  // The lock was let go above: the agent may have given up meanwhile (no room for the arena).
  if (phase_ == Phase::kNoArena) return Fail(FT_NO_SPACE, arena_error_);
  auto request = std::make_shared<AppRequest>();
  request->kind = AppRequest::Kind::kPeriodic;
  request->step = step;
  request->after = after;
  app_requests_.push_back(request);
  work_cv_.NotifyOne();
  done_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return request->copied; });
  if (request->outcome.result != FT_OK) return Fail(request->outcome.result, request->outcome.message);
  return FT_OK;
}

int Agent::Restore(int64_t* step) {
  if (step == nullptr) return Fail(FT_INVALID_ARGUMENT, "ft_restore: step is null");
  if (int r = RegisterEnd(); r != FT_OK) return r;
  {
    MutexLock lock(&mu_);
    if (phase_ != Phase::kReady) {
      return Fail(FT_INVALID_ARGUMENT, "ft_restore: nothing registered (call ft_register first)");
    }
  }
  // Until the restore ends, save commands wait: a save now would copy the state the app has
  // not restored yet over the arena's copy the restore is about to use.
  {
    MutexLock lock(&mu_);
    ++restoring_;
  }
  struct RestoreEnds {
    Agent* agent;
    ~RestoreEnds() {
      {
        MutexLock lock(&agent->mu_);
        --agent->restoring_;
      }
      agent->work_cv_.NotifyAll();
    }
  } ends{this};
  const LauncherIdentity& id = host::Identity();
  std::string path = ckpt::NodePlanPath(host::RuntimeConfig().ckpt_arena_dir, id.job, id.node);
  auto request = std::make_shared<AppRequest>();
  request->kind = AppRequest::Kind::kRestore;
  Status waited = WaitForPlan(path, host::RuntimeConfig().restore_wait, std::max(id.rank, 0), id.node, &request->plan);
  if (!waited.ok()) {
    RecordRestored(-1, 0);
    return Fail(FT_TIMEOUT, "ft_restore: " + std::string(waited.message()));
  }
  const int64_t plan_version = request->plan.version;
  int rank = std::max(id.rank, 0);
  if (request->plan.step < 0 || request->plan.Find(rank) == nullptr) {
    RecordRestored(-1, plan_version);
    return Fail(FT_NO_CHECKPOINT, "ft_restore: the restore plan (" + path + ") has no step for rank " +
                                      std::to_string(rank) + ": starting from scratch");
  }
  MutexLock lock(&mu_);
  if (phase_ == Phase::kNoArena) {  // the agent gave up while the plan was awaited
    RecordRestored(-1, plan_version);
    return Fail(FT_NO_SPACE, arena_error_);
  }
  app_requests_.push_back(request);
  work_cv_.NotifyOne();
  done_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return request->finished; });
  const RestoreOutcome& out = request->outcome;
  if (out.result != FT_OK) {
    RecordRestored(-1, plan_version);
    return Fail(out.result, out.message);
  }
  RecordRestored(out.step, plan_version);
  *step = out.step;  // the agent thread set the step label before any queued save ran
  return FT_OK;
}

void Agent::RecordRestored(int64_t step, int64_t plan_version) {
  // For the master's comparison of a launch's ranks (shm/layout.h): the version first, so a
  // reader that sees the step sees the plan it came from.
  if (!host::Started() || !host::Segment()) return;
  shm::SegmentHeader* h = host::Segment()->header();
  h->restore_plan_version.store(plan_version, std::memory_order_relaxed);
  h->restored_step_plus2.store(step < 0 ? 1 : step + 2, std::memory_order_release);
}

int ApiSetShard(int tp, int pp, int dp) { return TheAgent().SetShard(tp, pp, dp); }
int ApiRegister(const char* name, const void* ptr, size_t bytes) { return TheAgent().Register(name, ptr, bytes); }
int ApiRegisterEnd() { return TheAgent().RegisterEnd(); }
int ApiUpdateBegin(void* stream) { return TheAgent().UpdateBegin(static_cast<cudaStream_t>(stream)); }
int ApiStepDone(int64_t step) { return TheAgent().StepDone(step); }
int ApiRestore(int64_t* step) { return TheAgent().Restore(step); }

}  // namespace ft::preload::agent

#include "preload/ckpt_agent.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "include/ft/ft.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/node_plan.h"
#include "preload/ckpt_cuda.h"
#include "preload/ckpt_restore.h"
#include "preload/ckpt_save.h"
#include "preload/poller_rules.h"
#include "preload/real.h"
#include "preload/runtime_state.h"
#include "preload/timing.h"

namespace ft::preload::agent {

namespace {

using internal::AppCuda;
using internal::g_rt;
using internal::kMaxDevices;

constexpr int64_t kNoStep = INT64_MIN;

// Where registration stands. kOpen → (ft_register_end) kEnding → kReady, kNoArena or kEmpty.
enum class Phase { kOpen, kEnding, kReady, kNoArena, kEmpty };

// What an app thread asks of the agent thread and waits for.
struct AppRequest {
  enum class Kind { kPeriodic, kRestore };
  Kind kind = Kind::kPeriodic;
  int64_t step = 0;     // periodic: the step saved
  ckpt::NodePlan plan;  // restore
  // Answers, under Agent::mu_.
  bool copied = false;    // periodic: the device-to-host copy ended (the app may go on)
  bool finished = false;  // restore: done
  RestoreOutcome outcome;
};

struct SaveOutcome {
  Status status;
  std::string message;  // the ack's words
};

void Ack(uint64_t seq, const SaveOutcome& o) {
  if (g_rt == nullptr || !g_rt->segment) return;
  int32_t result = o.status.ok() ? 0 : static_cast<int32_t>(o.status.code());
  shm::AckCommand(*g_rt->segment, seq, result, o.message);
}

void AckNow(uint64_t seq, StatusCode code, const std::string& message) {
  if (g_rt == nullptr || !g_rt->segment) return;
  shm::AckCommand(*g_rt->segment, seq, static_cast<int32_t>(code), message);
}

class Agent {
 public:
  int SetShard(int tp, int pp, int dp);
  int Register(const char* name, const void* ptr, size_t bytes);
  int RegisterEnd();
  int UpdateBegin(cudaStream_t stream);
  int StepDone(int64_t step);
  int Restore(int64_t* step);
  void HandOver(const shm::Command& command);
  void FinishAtExit() noexcept;

 private:
  int OpenArena(std::vector<Registered> buffers, int tp, int pp, int dp);
  void GiveUp(const std::string& message, const std::string& ack, StatusCode code);
  void Run();
  RestoreOutcome Restore(const AppRequest& request, AgentCuda* cuda);
  void Failed(const std::shared_ptr<AppRequest>& request, std::vector<uint64_t>* waiters) noexcept;
  SaveOutcome Save(const std::shared_ptr<AppRequest>& periodic, AgentCuda* cuda);
  void FinishSave(std::vector<uint64_t> waiters, const SaveOutcome& outcome);
  bool TornNow();
  int64_t StepLabel() const;
  cudaEvent_t UpdateEventFor(int device, AppCuda* cuda);

  std::mutex mu_;
  std::condition_variable work_cv_;  // the agent thread waits for work
  std::condition_variable done_cv_;  // app threads wait for their request
  // Registration (mu_). Immutable once phase_ left kEnding.
  Phase phase_ = Phase::kOpen;
  std::string arena_error_;  // kNoArena: why (ft_last_error)
  std::string arena_ack_;    // kNoArena: why, short enough for an ack (96 bytes)
  int tp_ = -1, pp_ = -1, dp_ = -1;
  std::vector<Registered> buffers_;
  ckpt::Manifest base_;  // identity and layout of every save
  ckpt::Arena arena_;
  int device_ = -1;
  // Work (mu_).
  std::deque<std::shared_ptr<AppRequest>> app_requests_;
  std::vector<uint64_t> jit_waiting_;      // kSave commands not yet served
  std::vector<uint64_t> at_step_waiting_;  // kSaveAtStep: served by the next periodic save
  std::vector<uint64_t> attached_;         // save commands that arrived while a save ran
  bool saving_ = false;
  // App-side progress (lock-free: ft_step_done and ft_update_begin are on the training loop).
  std::atomic<int64_t> last_step_{kNoStep};
  std::atomic<int64_t> restored_step_{kNoStep};
  std::atomic<bool> update_open_{false};  // ft_update_begin after the last ft_step_done
  std::atomic<cudaEvent_t> update_event_{nullptr};  // null: the update may have begun
  std::atomic<cudaEvent_t> device_events_[kMaxDevices] = {};
};

Agent& TheAgent() {
  // Never destroyed: the agent thread and the poller may outlive static destruction.
  static Agent* agent = new Agent;
  return *agent;
}

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

int Fail(int result, std::string message) {
  SetLastError(std::move(message));
  return result;
}

int Agent::SetShard(int tp, int pp, int dp) {
  if (tp < -1 || pp < -1 || dp < -1) {
    return Fail(FT_INVALID_ARGUMENT, "ft_set_shard: indices are >= 0, or -1 for unknown");
  }
  std::lock_guard<std::mutex> lock(mu_);
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
  if (auto attributes = FT_REAL_CUDA(cudaPointerGetAttributes)) {
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
  std::lock_guard<std::mutex> lock(mu_);
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
  return FT_OK;
}

int Agent::RegisterEnd() {
  std::vector<Registered> buffers;
  int tp, pp, dp;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Another thread is ending registration: wait for it (start-up, seconds at most).
    done_cv_.wait(lock, [&] { return phase_ != Phase::kEnding; });
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
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = Phase::kNoArena;
    arena_error_ = message;
    arena_ack_ = ack;
    queued.swap(jit_waiting_);
    queued.insert(queued.end(), at_step_waiting_.begin(), at_step_waiting_.end());
    at_step_waiting_.clear();
  }
  done_cv_.notify_all();
  for (uint64_t seq : queued) AckNow(seq, code, ack);
}

int Agent::OpenArena(std::vector<Registered> buffers, int tp, int pp, int dp) {
  const Config& cfg = g_rt->config;
  const LauncherIdentity& id = g_rt->identity;
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
        ckpt::ManifestCapacity(laid_out, data_bytes, base.chunk_bytes), data_bytes, &arena);
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
  for (const Registered& b : buffers) {
    if (b.where != Registered::Where::kHost) device = b.device;
  }
  if (cfg.ckpt_pin) {
    // Pinned, the device-to-host copies run at full speed and asynchronously. The cost
    // (~0.1 s/GB) is paid here, at start-up, never at save time.
    auto start = std::chrono::steady_clock::now();
    auto host_register = FT_REAL_CUDA(cudaHostRegister);
    AppCuda cuda;
    cudaError_t e = host_register == nullptr
                        ? cudaErrorSharedObjectSymbolNotFound
                        : cuda.Check(host_register(arena.data(), arena.data_capacity(),
                                                   cudaHostRegisterDefault));
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (e == cudaSuccess) {
      FT_LOG(Info, Ckpt, "host arena {}: {} bytes pinned in {:.3f} s", arena.path(),
             arena.data_capacity(), seconds);
    } else {
      FT_LOG(Warn, Ckpt, "host arena {}: pinning failed ({}); saves run unpinned (slower)",
             arena.path(), CudaStatus(e, "cudaHostRegister").ToString());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    buffers_ = std::move(buffers);
    base_ = std::move(base);
    arena_ = std::move(arena);
    device_ = device;
    phase_ = Phase::kReady;
  }
  done_cv_.notify_all();
  static std::once_flag exit_handler;
  std::call_once(exit_handler, [] { atexit([] { TheAgent().FinishAtExit(); }); });
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

cudaEvent_t Agent::UpdateEventFor(int device, AppCuda* cuda) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  cudaEvent_t e = device_events_[device].load(std::memory_order_acquire);
  if (e != nullptr) return e;
  auto create = FT_REAL_CUDA(cudaEventCreateWithFlags);
  if (create == nullptr || cuda->Check(create(&e, cudaEventDisableTiming)) != cudaSuccess) return nullptr;
  cudaEvent_t expected = nullptr;
  if (!device_events_[device].compare_exchange_strong(expected, e)) {
    if (auto destroy = FT_REAL_CUDA(cudaEventDestroy)) cuda->Check(destroy(e));
    return expected;
  }
  return e;
}

int Agent::UpdateBegin(cudaStream_t stream) {
  cudaEvent_t marked = nullptr;
  if (stream != nullptr && internal::MayRecordInto(stream)) {
    AppCuda cuda;
    int device = -1;
    auto get_device = FT_REAL_CUDA(cudaGetDevice);
    auto record = FT_REAL_CUDA(cudaEventRecord);
    if (get_device != nullptr && record != nullptr &&
        cuda.Check(get_device(&device)) == cudaSuccess) {
      cudaEvent_t e = UpdateEventFor(device, &cuda);
      if (e != nullptr && cuda.Check(record(e, stream)) == cudaSuccess) marked = e;
    }
  }
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
  auto query = FT_REAL_CUDA(cudaEventQuery);
  return query == nullptr || query(e) != cudaErrorNotReady;
}

int64_t Agent::StepLabel() const {
  int64_t step = last_step_.load(std::memory_order_acquire);
  if (step != kNoStep) return step;
  step = restored_step_.load(std::memory_order_acquire);
  return step != kNoStep ? step : 0;
}

int Agent::StepDone(int64_t step) {
  last_step_.store(step, std::memory_order_release);
  update_open_.store(false, std::memory_order_release);
  Phase phase;
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase = phase_;
  }
  if (phase == Phase::kOpen || phase == Phase::kEnding) {
    if (int r = RegisterEnd(); r != FT_OK) return r;
  }
  int64_t every = g_rt->config.ckpt_every;
  std::unique_lock<std::mutex> lock(mu_);
  if (phase_ == Phase::kNoArena) return Fail(FT_NO_SPACE, arena_error_);
  if (phase_ != Phase::kReady) return FT_OK;
  bool due = (every > 0 && step % every == 0) || !at_step_waiting_.empty();
  if (!due) return FT_OK;
  auto request = std::make_shared<AppRequest>();
  request->kind = AppRequest::Kind::kPeriodic;
  request->step = step;
  app_requests_.push_back(request);
  work_cv_.notify_one();
  done_cv_.wait(lock, [&] { return request->copied; });
  if (request->outcome.result != FT_OK) return Fail(request->outcome.result, request->outcome.message);
  return FT_OK;
}

int Agent::Restore(int64_t* step) {
  if (step == nullptr) return Fail(FT_INVALID_ARGUMENT, "ft_restore: step is null");
  if (int r = RegisterEnd(); r != FT_OK) return r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ != Phase::kReady) {
      return Fail(FT_INVALID_ARGUMENT, "ft_restore: nothing registered (call ft_register first)");
    }
  }
  const LauncherIdentity& id = g_rt->identity;
  std::string path = ckpt::NodePlanPath(g_rt->config.ckpt_arena_dir, id.job, id.node);
  auto request = std::make_shared<AppRequest>();
  request->kind = AppRequest::Kind::kRestore;
  Status waited = WaitForPlan(path, g_rt->config.restore_wait, &request->plan);
  if (!waited.ok()) return Fail(FT_TIMEOUT, "ft_restore: " + std::string(waited.message()));
  int rank = std::max(id.rank, 0);
  if (request->plan.step < 0 || request->plan.Find(rank) == nullptr) {
    return Fail(FT_NO_CHECKPOINT, "ft_restore: the restore plan (" + path + ") has no step for rank " +
                                      std::to_string(rank) + ": starting from scratch");
  }
  std::unique_lock<std::mutex> lock(mu_);
  app_requests_.push_back(request);
  work_cv_.notify_one();
  done_cv_.wait(lock, [&] { return request->finished; });
  const RestoreOutcome& out = request->outcome;
  if (out.result != FT_OK) return Fail(out.result, out.message);
  restored_step_.store(out.step, std::memory_order_release);
  *step = out.step;
  return FT_OK;
}

// At a normal exit (the app returned from main or called exit): a save in progress, or asked
// for, is finished first — typically the periodic save of the last step, whose commit runs
// after ft_step_done returned; cut short, it would leave the arena without any committed
// copy. Bounded: a copy stuck behind a dead device is given up after kExitWait.
void Agent::FinishAtExit() noexcept {
  constexpr auto kExitWait = std::chrono::seconds(10);
  try {
    if (g_rt == nullptr || getpid() != g_rt->owner_pid) return;  // a forked child: not its saves
    std::unique_lock<std::mutex> lock(mu_);
    if (phase_ != Phase::kReady) return;
    bool done = done_cv_.wait_for(lock, kExitWait, [&] {
      return !saving_ && app_requests_.empty() && jit_waiting_.empty();
    });
    if (!done) FT_LOG(Warn, Ckpt, "exit: a save still running after 10 s is abandoned (uncommitted)");
  } catch (...) {
  }
}

void Agent::HandOver(const shm::Command& command) {
  bool at_step = command.type == static_cast<uint32_t>(shm::CommandType::kSaveAtStep);
  std::string refusal;
  StatusCode code = StatusCode::kNotFound;
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (phase_) {
      case Phase::kEmpty:
        refusal = "nothing registered";
        break;
      case Phase::kOpen:
        // A periodic save waits for the next ft_step_done, which ends registration.
        if (buffers_.empty() || !at_step) refusal = "nothing registered";
        break;
      case Phase::kNoArena:
        refusal = arena_ack_;
        code = StatusCode::kIoError;
        break;
      default:
        break;
    }
    if (refusal.empty()) {
      if (at_step) {
        at_step_waiting_.push_back(command.seq);
      } else if (saving_) {
        attached_.push_back(command.seq);  // coalesced with the save that runs
      } else {
        jit_waiting_.push_back(command.seq);
        work_cv_.notify_one();
      }
      return;
    }
  }
  AckNow(command.seq, code, refusal);
}

SaveOutcome Agent::Save(const std::shared_ptr<AppRequest>& periodic, AgentCuda* cuda) {
  auto start = std::chrono::steady_clock::now();
  SaveJob job;
  job.buffers = &buffers_;
  job.manifest = base_;
  job.manifest.step = periodic ? periodic->step : StepLabel();
  job.arena = &arena_;
  job.device = device_;
  job.periodic = periodic != nullptr;
  if (periodic) {
    job.copied = [&](const Status& s) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        periodic->copied = true;
        if (!s.ok()) {
          periodic->outcome.result = FT_CUDA_ERROR;
          periodic->outcome.message = "ft_step_done: periodic save failed: " + s.ToString();
        }
      }
      done_cv_.notify_all();
    };
  } else {
    job.torn = [this] { return TornNow(); };
  }
  SaveOutcome out;
  out.status = RunSave(&job, cuda);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  const ckpt::Manifest& m = job.manifest;
  if (out.status.ok()) {
    out.message = "saved step=" + std::to_string(m.step) +
                  " digest=" + ckpt::DigestHex(ckpt::ContentDigest(m)) +
                  " torn=" + (m.torn ? "1" : "0") + " bytes=" + std::to_string(m.data_bytes) +
                  " ms=" + std::to_string(ms);
    FT_LOG(Info, Ckpt, "{} save: {}", periodic ? "periodic" : "just-in-time", out.message);
  } else {
    out.message = std::string(out.status.message());
    FT_LOG(Warn, Ckpt, "save of step {} failed: {}; the previous copy is lost, training is unaffected",
           m.step, out.status.ToString());
  }
  return out;
}

void Agent::FinishSave(std::vector<uint64_t> waiters, const SaveOutcome& outcome) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiters.insert(waiters.end(), attached_.begin(), attached_.end());
    attached_.clear();
    saving_ = false;
  }
  done_cv_.notify_all();  // an exiting process may wait for this save (FinishAtExit)
  for (uint64_t seq : waiters) Ack(seq, outcome);
}

// The agent thread's boundary: nothing may escape it (std::terminate would end the app). A
// failure inside one piece of work fails that work — its app thread and its commands get an
// answer — and the thread goes on.
void Agent::Run() {
  t_in_ft = true;  // our CUDA calls are never the app's
  pthread_setname_np(pthread_self(), "ft-ckpt");
  AgentCuda cuda;
  for (;;) {
    std::shared_ptr<AppRequest> request;
    std::vector<uint64_t> waiters;
    bool save = false;
    try {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return !app_requests_.empty() || !jit_waiting_.empty(); });
      if (!app_requests_.empty()) {
        request = app_requests_.front();
        app_requests_.pop_front();
      }
      if (request && request->kind == AppRequest::Kind::kRestore) {
        lock.unlock();
        RestoreOutcome out = Restore(*request, &cuda);
        lock.lock();
        request->outcome = std::move(out);
        request->finished = true;
        lock.unlock();
        done_cv_.notify_all();
        continue;
      }
      // A save: it serves every save command waiting now (coalesced), and a periodic one also
      // the kSaveAtStep commands.
      save = true;
      waiters.swap(jit_waiting_);
      if (request) {
        waiters.insert(waiters.end(), at_step_waiting_.begin(), at_step_waiting_.end());
        at_step_waiting_.clear();
      }
      saving_ = true;
      lock.unlock();
      SaveOutcome outcome = Save(request, &cuda);
      FinishSave(std::move(waiters), outcome);
    } catch (...) {
      Failed(request, save ? &waiters : nullptr);
    }
  }
}

RestoreOutcome Agent::Restore(const AppRequest& request, AgentCuda* cuda) {
  RestoreTarget target;
  target.rank = base_.rank;
  target.node = g_rt->identity.node;
  target.buffers = &buffers_;
  target.layout = base_.buffers;
  target.arena = &arena_;
  target.device = device_;
  return RestoreFromPlan(request.plan, target, cuda);
}

// After an exception in the agent thread: whoever waits for the work gets an answer.
void Agent::Failed(const std::shared_ptr<AppRequest>& request, std::vector<uint64_t>* waiters) noexcept {
  try {
    FT_LOG(Warn, Ckpt, "the checkpoint agent failed on one piece of work; training is unaffected");
    SaveOutcome outcome;
    outcome.status = Status::Internal("checkpoint agent: internal error");
    outcome.message = "checkpoint agent: internal error";
    if (request) {
      std::lock_guard<std::mutex> lock(mu_);
      request->copied = true;
      request->finished = true;
      if (request->outcome.result == FT_OK) request->outcome.result = FT_INTERNAL;
      request->outcome.message = "ft_restore/ft_step_done: the checkpoint agent failed (a bug in ft)";
    }
    done_cv_.notify_all();
    if (waiters != nullptr) FinishSave(std::move(*waiters), outcome);
  } catch (...) {
  }
}

}  // namespace

int ApiSetShard(int tp, int pp, int dp) { return TheAgent().SetShard(tp, pp, dp); }
int ApiRegister(const char* name, const void* ptr, size_t bytes) { return TheAgent().Register(name, ptr, bytes); }
int ApiRegisterEnd() { return TheAgent().RegisterEnd(); }
int ApiUpdateBegin(void* stream) { return TheAgent().UpdateBegin(static_cast<cudaStream_t>(stream)); }
int ApiStepDone(int64_t step) { return TheAgent().StepDone(step); }
int ApiRestore(int64_t* step) { return TheAgent().Restore(step); }

void HandOverSaveCommand(const shm::Command& command) noexcept {
  try {
    TheAgent().HandOver(command);
  } catch (...) {
    AckNow(command.seq, StatusCode::kInternal, "the checkpoint agent failed to take the command");
  }
}

}  // namespace ft::preload::agent

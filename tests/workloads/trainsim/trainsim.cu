// trainsim: a training step on dp x tp x pp ranks, one process per rank, for testing hang and
// slowdown detection. Built by nvcc against the real CUDA and NCCL headers and linked against
// libcudart.so.13 and libnccl.so.2; it runs unchanged on real GPUs or on any library that
// provides those ABIs. See README.md for the model and trainsim_math.h for its arithmetic.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bootstrap.h"
#include "config.h"
#include "faults.h"
#include "ft_state.h"
#include "kernel_list.h"
#include "trainsim_math.h"

namespace trainsim {

// ---------------------------------------------------------------------------------------------
// Kernels

#define TS_DEFINE_KERNEL(name, params, args)                                              \
  __global__ void name params {                                                           \
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;                  \
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;  \
         i += stride) {                                                                   \
      name##_at(i, TRAINSIM_UNPAREN args);                                                \
    }                                                                                     \
  }
TRAINSIM_ELEMENTWISE_KERNELS(TS_DEFINE_KERNEL)
#undef TS_DEFINE_KERNEL

#define TS_DECLARE_KERNEL(name, params) __global__ void name params;
TRAINSIM_SPECIAL_KERNELS(TS_DECLARE_KERNEL)
#undef TS_DECLARE_KERNEL

__device__ inline uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The "real work" of a step: occupies the stream for ns nanoseconds.
__global__ void compute_spin(int64_t ns) {
  if (threadIdx.x != 0) return;
  const uint64_t start = GlobalTimerNs();
  while (static_cast<int64_t>(GlobalTimerNs() - start) < ns) {
  }
}

// Fault injection: waits for a flag that is never set, so the stream never passes it.
__global__ void hang_forever(const int* flag) {
  if (threadIdx.x != 0) return;
  const volatile int* f = flag;
  while (*f == 0) __nanosleep(1000000);
}

// ---------------------------------------------------------------------------------------------
// Errors: reported with file:line and the library's message, then exit 1.

int g_rank = -1;

[[noreturn]] void Die(const char* file, int line, const char* what, const std::string& msg) {
  std::fprintf(stderr, "trainsim rank=%d: %s:%d: %s: %s\n", g_rank, file, line, what, msg.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  // _exit: a stuck stream or communicator must not keep the process alive in exit handlers.
  _exit(1);
}

#define CUDA_CHECK(expr)                                                         \
  do {                                                                           \
    const cudaError_t e_ = (expr);                                               \
    if (e_ != cudaSuccess) Die(__FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
  } while (0)

#define NCCL_CHECK(expr)                                                         \
  do {                                                                           \
    const ncclResult_t r_ = (expr);                                              \
    if (r_ != ncclSuccess) Die(__FILE__, __LINE__, #expr, ncclGetErrorString(r_)); \
  } while (0)

constexpr int kThreads = 256;
inline unsigned Blocks(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 4096));
}

// An elementwise kernel over n elements on `stream`.
#define LAUNCH(kernel, n, ...)                                                      \
  do {                                                                              \
    kernel<<<Blocks(n), kThreads, 0, stream_>>>(__VA_ARGS__);                       \
    CUDA_CHECK(cudaGetLastError());                                                 \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Environment (what torchrun sets; Slurm's names as a fallback)

int EnvInt(const char* name, const char* fallback, int def) {
  const char* v = std::getenv(name);
  if (v == nullptr && fallback != nullptr) v = std::getenv(fallback);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 24)) {
    std::fprintf(stderr, "trainsim: error: bad %s='%s'\n", name, v);
    std::exit(2);
  }
  return static_cast<int>(x);
}

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Wall-clock milliseconds: the fault and resume lines carry them so a harness on the same host
// can time "fault injected -> training resumed" across a relaunch (monotonic clocks are per boot,
// but the processes of two launches share nothing else).
long long UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------------------------

class Trainer {
 public:
  Trainer(const Config& c, int rank, int local_rank) : c_(c), rank_(rank), local_rank_(local_rank) {
    co_ = CoordOf(c_, rank_);
    lps_ = c_.layers_per_stage();
    shard_ = c_.shard_len();
    hidden_ = c_.hidden;
    first_stage_ = co_.pp == 0;
    last_stage_ = co_.pp == c_.pp - 1;
    slice_ = c_.optimizer_slice();
    padded_ = c_.sharded_optimizer ? slice_ * c_.dp : lps_ * shard_;
  }

  void Init(const std::string& master_addr, int port) {
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    if (devices < 1) Die(__FILE__, __LINE__, "cudaGetDeviceCount", "no CUDA device");
    CUDA_CHECK(cudaSetDevice(local_rank_ % devices));

    ncclUniqueId id{};
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    std::string error;
    if (!ExchangeBlob(master_addr, port, rank_, c_.world(), &id, sizeof(id), &error)) {
      Die(__FILE__, __LINE__, "bootstrap", error);
    }
    ncclConfig_t world_cfg = NCCL_CONFIG_INITIALIZER;
    world_cfg.commName = "world";
    NCCL_CHECK(ncclCommInitRankConfig(&world_, c_.world(), id, rank_, &world_cfg));
    // Every rank splits in the same order. Colors number the groups; keys order members by
    // their coordinate, so a member's rank in the new communicator is its coordinate.
    ncclConfig_t dp_cfg = NCCL_CONFIG_INITIALIZER;
    dp_cfg.commName = "dp";
    NCCL_CHECK(ncclCommSplit(world_, co_.tp + c_.tp * co_.pp, co_.dp, &dp_, &dp_cfg));
    ncclConfig_t tp_cfg = NCCL_CONFIG_INITIALIZER;
    tp_cfg.commName = "tp";
    NCCL_CHECK(ncclCommSplit(world_, co_.dp + c_.dp * co_.pp, co_.tp, &tp_, &tp_cfg));
    ncclConfig_t pp_cfg = NCCL_CONFIG_INITIALIZER;
    pp_cfg.commName = "pp";
    NCCL_CHECK(ncclCommSplit(world_, co_.tp + c_.tp * co_.dp, co_.pp, &pp_, &pp_cfg));

    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    if (c_.overlap_grad_reduce) {
      CUDA_CHECK(cudaStreamCreateWithFlags(&reduce_stream_, cudaStreamNonBlocking));
      grads_ready_.resize(static_cast<size_t>(lps_) + 1);
      for (cudaEvent_t& e : grads_ready_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    // With --sharded-optimizer the buffers are padded to dp equal slices (zeros past nparams:
    // no gradient reaches them, so the optimizer keeps them zero).
    CUDA_CHECK(cudaMalloc(&params_, padded_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&grads_, padded_ * sizeof(float)));
    // On stream_: a memset on the legacy default stream is not ordered before the
    // initialization below (stream_ is non-blocking).
    CUDA_CHECK(cudaMemsetAsync(params_, 0, padded_ * sizeof(float), stream_));
    CUDA_CHECK(cudaMemsetAsync(grads_, 0, padded_ * sizeof(float), stream_));
    if (c_.optimizer == Optimizer::kMomentum) {
      CUDA_CHECK(cudaMalloc(&momentum_, slice_ * sizeof(float)));
      CUDA_CHECK(cudaMemsetAsync(momentum_, 0, slice_ * sizeof(float), stream_));
    }
    CUDA_CHECK(cudaMalloc(&acts_, int64_t{c_.microbatches} * (lps_ + 1) * hidden_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&part_, hidden_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&gbuf_, 2 * hidden_ * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&hang_flag_, sizeof(int)));
    CUDA_CHECK(cudaMemset(hang_flag_, 0, sizeof(int)));
    CUDA_CHECK(cudaMalloc(&opt_steps_, sizeof(int64_t)));
    CUDA_CHECK(cudaMemset(opt_steps_, 0, sizeof(int64_t)));
    for (int64_t l = 0; l < lps_; ++l) {
      LAUNCH(init_params, shard_, params_ + l * shard_, ParamKey(c_.seed, GlobalLayer(l)),
             int64_t{co_.tp} * shard_, shard_);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // With libft.so: registers the parameters and the optimizer's state, and restores the
  // planned checkpoint (training then starts at its step). Without it: nothing.
  void RegisterAndRestore() {
    // ft copies the state on its own non-blocking stream, which is not ordered after the work
    // still queued here (the default stream's memsets, the parameters' initialization): a
    // restore must land after all of it, or the initialization overwrites the restored state.
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<StateBuffer> state;
    for (int64_t l = 0; l < lps_; ++l) {
      state.push_back({"layers." + std::to_string(GlobalLayer(l)) + ".weight", params_ + l * shard_,
                       static_cast<size_t>(shard_) * sizeof(float)});
    }
    state.push_back({"optimizer.steps", opt_steps_, sizeof(int64_t)});
    if (momentum_ != nullptr) {
      // Sharded: each DP rank holds a different slice, under its own name (the shard identity
      // (tp, pp, dp) of ft_set_shard tells the copies apart as well).
      state.push_back({c_.sharded_optimizer ? "optimizer.momentum.dp" + std::to_string(co_.dp) : "optimizer.momentum",
                       momentum_, static_cast<size_t>(slice_) * sizeof(float)});
    }
    ft_ = FtRegisterAndRestore(c_, co_, state);
    if (!ft_.warning.empty()) std::fprintf(stderr, "trainsim rank=%d: warning: %s\n", rank_, ft_.warning.c_str());
    if (!ft_.error.empty()) Die(__FILE__, __LINE__, "restore", ft_.error);
    if (ft_.restored) std::printf("trainsim rank=%d restored step=%lld\n", rank_, static_cast<long long>(ft_.step));
  }

  void Run() {
    for (int step = static_cast<int>(ft_.step); step < c_.steps; ++step) {
      const bool faulting = c_.fault != FaultKind::kNone && (rank_ == c_.fault_rank || c_.fault_rank == kAllRanks);
      if (faulting && step == c_.fault_step) InjectFault(step);
      const double t0 = NowS();
      double compute_ms = c_.compute_ms * Jitter(step);
      if (faulting && c_.fault == FaultKind::kSlow && step >= c_.fault_step &&
          (c_.slow_steps == 0 || step < c_.fault_step + c_.slow_steps)) {
        compute_ms *= c_.slow_factor;
      }
      Step(step, static_cast<int64_t>(compute_ms * 1e6));
      if (c_.step_sync) {
        CUDA_CHECK(cudaStreamSynchronize(stream_));
      } else {
        RunAhead();
      }
      FtStepDone(ft_, step + 1);  // the label is the number of steps completed (or queued)
      if (ft_.restored && step == static_cast<int>(ft_.step)) {
        std::printf("trainsim rank=%d resumed step=%d unix_ms=%lld\n", rank_, step + 1, UnixMs());
        std::fflush(stdout);
      }
      if (c_.verbose) {
        // unix_ms: when the step ended, for tests that time phases of a job against ft's figures.
        std::printf("trainsim rank=%d step=%d ms=%.3f unix_ms=%lld\n", rank_, step, (NowS() - t0) * 1e3, UnixMs());
      }
    }
    // The checks below read the state with plain cudaMemcpy (the legacy stream, which a
    // non-blocking stream_ is not ordered with): the last steps must have landed.
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // --jitter: a factor in [1 - J, 1 + J] from (rank, step) alone, so a rerun draws the same.
  double Jitter(int step) const {
    if (c_.jitter <= 0) return 1;
    // splitmix64 of (rank, step): no rank draws higher on average than another.
    uint64_t x = (static_cast<uint64_t>(rank_) << 32 | static_cast<uint32_t>(step)) + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    const double unit = static_cast<double>(x >> 11) / 9007199254740992.0;  // [0, 1)
    return 1 + c_.jitter * (2 * unit - 1);
  }

  // --no-step-sync: the host queues the next steps without waiting, but no further than
  // kRunAhead steps beyond its device, as a real program's host is held back by CUDA's launch
  // queue (about a thousand launches: a step of a real model or two; trainsim's steps are a
  // few dozen launches, so the queue alone would let it run the whole job ahead).
  static constexpr size_t kRunAhead = 2;
  void RunAhead() {
    cudaEvent_t e = nullptr;
    if (!spare_events_.empty()) {
      e = spare_events_.back();
      spare_events_.pop_back();
    } else {
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventRecord(e, stream_));
    step_ends_.push_back(e);
    if (step_ends_.size() > kRunAhead) {
      CUDA_CHECK(cudaEventSynchronize(step_ends_.front()));
      spare_events_.push_back(step_ends_.front());
      step_ends_.erase(step_ends_.begin());
    }
  }

  // The optimizer counted every update it applied, restored ones included: anything but
  // --steps means the state came back from two different steps.
  void CheckOptimizerSteps() {
    int64_t applied = -1;
    CUDA_CHECK(cudaMemcpy(&applied, opt_steps_, sizeof(applied), cudaMemcpyDeviceToHost));
    if (applied != c_.steps) {
      Die(__FILE__, __LINE__, "optimizer.steps",
          "the optimizer applied " + std::to_string(applied) + " updates, expected " + std::to_string(c_.steps));
    }
  }

  uint64_t Checksum() {
    std::vector<float> host(lps_ * shard_);
    CUDA_CHECK(cudaMemcpy(host.data(), params_, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return Fnv1a64(host.data(), host.size() * sizeof(float));
  }

  void Shutdown() {
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    NCCL_CHECK(ncclCommDestroy(pp_));
    NCCL_CHECK(ncclCommDestroy(tp_));
    NCCL_CHECK(ncclCommDestroy(dp_));
    NCCL_CHECK(ncclCommDestroy(world_));
    for (void* p : {static_cast<void*>(params_), static_cast<void*>(grads_), static_cast<void*>(acts_),
                    static_cast<void*>(part_), static_cast<void*>(gbuf_), static_cast<void*>(hang_flag_),
                    static_cast<void*>(opt_steps_), static_cast<void*>(momentum_)}) {
      if (p != nullptr) CUDA_CHECK(cudaFree(p));
    }
    for (cudaEvent_t e : grads_ready_) CUDA_CHECK(cudaEventDestroy(e));
    if (reduce_stream_ != nullptr) CUDA_CHECK(cudaStreamDestroy(reduce_stream_));
    CUDA_CHECK(cudaStreamDestroy(stream_));
  }

 private:
  int64_t GlobalLayer(int64_t local) const { return co_.pp * lps_ + local; }
  int64_t GlobalMicrobatch(int m) const { return int64_t{co_.dp} * c_.microbatches + m; }
  float* Act(int m, int64_t layer) const { return acts_ + (int64_t{m} * (lps_ + 1) + layer) * hidden_; }
  float* Grad(int m) const { return gbuf_ + (m % 2) * hidden_; }
  int64_t ShardOffset() const { return int64_t{co_.tp} * shard_; }

  void InjectFault(int step) {
    std::fprintf(stderr, "trainsim rank=%d: injecting fault %s at step %d unix_ms=%lld\n", rank_,
                 FaultName(c_.fault), step, UnixMs());
    std::fflush(stdout);
    std::fflush(stderr);
    if (c_.fault == FaultKind::kHangKernel) {
      hang_forever<<<1, 1, 0, stream_>>>(hang_flag_);
      CUDA_CHECK(cudaGetLastError());
    } else if (c_.fault == FaultKind::kSdc) {
      CorruptOneParameter();
    } else {
      // A fault of the host "at step S" comes after the device finished step S-1, also with
      // --no-step-sync: the ranks' devices are where a synchronized run's would be, and only
      // the peers' hosts run ahead of theirs.
      if (c_.fault != FaultKind::kSlow) CUDA_CHECK(cudaStreamSynchronize(stream_));
      InjectHostFault(c_, rank_);
    }
  }

  // Silent data corruption: one bit of the first parameter that can take a flip within the
  // model's domain (faults.h), changed on the device behind the program's back, once the
  // stream is idle (plain cudaMemcpy then sees the previous step's final state).
  void CorruptOneParameter() {
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // --no-step-sync: the last step may still be queued
    std::vector<float> head(static_cast<size_t>(std::min<int64_t>(shard_, 4096)));
    CUDA_CHECK(cudaMemcpy(head.data(), params_, head.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < head.size(); ++i) {
      float flipped = 0;
      int bit = 0;
      if (!FlipParameterBit(head[i], &flipped, &bit)) continue;
      CUDA_CHECK(cudaMemcpy(params_ + i, &flipped, sizeof(float), cudaMemcpyHostToDevice));
      std::fprintf(stderr, "trainsim rank=%d: sdc: layers.%lld.weight[%zu] %g -> %g (bit %d)\n", rank_,
                   static_cast<long long>(GlobalLayer(0)), i, head[i], flipped, bit);
      return;
    }
    Die(__FILE__, __LINE__, "sdc", "no parameter >= 2 among the first " + std::to_string(head.size()));
  }

  void AllReduceTp(float* buf) {
    if (c_.tp > 1) NCCL_CHECK(ncclAllReduce(buf, buf, hidden_, ncclFloat, ncclSum, tp_, stream_));
  }

  void Forward(int m) {
    for (int64_t l = 0; l < lps_; ++l) {
      LAUNCH(forward_partial, hidden_, params_ + l * shard_, Act(m, l), part_, ShardOffset(), shard_, hidden_);
      AllReduceTp(part_);
      LAUNCH(forward_finish, hidden_, part_, Act(m, l + 1), GlobalLayer(l), hidden_);
    }
  }

  // spin_ns: compute before each layer's (--compute-at backward). reduce: the micro-batch is the
  // last, so each layer's gradient is whole once backward_params has run: --overlap-grad-reduce
  // all-reduces it on reduce_stream_ from there.
  void Backward(int m, int64_t spin_ns, bool reduce) {
    float* g = Grad(m);
    for (int64_t l = lps_ - 1; l >= 0; --l) {
      if (spin_ns > 0) {
        compute_spin<<<1, 32, 0, stream_>>>(spin_ns);
        CUDA_CHECK(cudaGetLastError());
      }
      LAUNCH(backward_params, shard_, Act(m, l), g, grads_ + l * shard_, ShardOffset(), hidden_, shard_);
      if (reduce) {
        CUDA_CHECK(cudaEventRecord(grads_ready_[l], stream_));
        CUDA_CHECK(cudaStreamWaitEvent(reduce_stream_, grads_ready_[l], 0));
        NCCL_CHECK(ncclAllReduce(grads_ + l * shard_, grads_ + l * shard_, shard_, ncclFloat, ncclSum, dp_,
                                 reduce_stream_));
      }
      LAUNCH(backward_input, hidden_, params_ + l * shard_, g, part_, ShardOffset(), shard_, hidden_);
      AllReduceTp(part_);
      LAUNCH(backward_finish, hidden_, part_, g, GlobalLayer(l), hidden_);
    }
  }

  void LoadBatch(int m, int step) {
    LAUNCH(load_batch, hidden_, Act(m, 0), InputKey(c_.seed, step, GlobalMicrobatch(m)), hidden_);
  }
  void LossGrad(int m, int step) {
    LAUNCH(loss_grad, hidden_, Act(m, lps_), Grad(m), TargetKey(c_.seed, step, GlobalMicrobatch(m)), hidden_);
  }

  // One training step, enqueued on stream_: GPipe schedule (all forwards, then all
  // backwards), the data-parallel gradient all-reduce, the optimizer.
  void Step(int step, int64_t compute_ns) {
    const int mbs = c_.microbatches;
    const int prev = co_.pp - 1;
    const int next = co_.pp + 1;
    const bool in_backward = c_.compute_at == ComputeAt::kBackward;
    if (compute_ns > 0 && !in_backward) {
      compute_spin<<<1, 32, 0, stream_>>>(compute_ns);
      CUDA_CHECK(cudaGetLastError());
    }
    const int64_t layer_spin_ns = in_backward ? compute_ns / (int64_t{mbs} * lps_) : 0;
    const bool overlap = c_.overlap_grad_reduce && c_.dp > 1;
    LAUNCH(fill, padded_, grads_, 0.0f, padded_);

    // Forward: receive micro-batch m's input, run the stage, then in one group send its output
    // on and receive the next micro-batch's input.
    if (first_stage_) {
      LoadBatch(0, step);
    } else {
      NCCL_CHECK(ncclRecv(Act(0, 0), hidden_, ncclFloat, prev, pp_, stream_));
    }
    for (int m = 0; m < mbs; ++m) {
      Forward(m);
      const bool send = !last_stage_;
      const bool recv = !first_stage_ && m + 1 < mbs;
      if (send || recv) {
        NCCL_CHECK(ncclGroupStart());
        if (send) NCCL_CHECK(ncclSend(Act(m, lps_), hidden_, ncclFloat, next, pp_, stream_));
        if (recv) NCCL_CHECK(ncclRecv(Act(m + 1, 0), hidden_, ncclFloat, prev, pp_, stream_));
        NCCL_CHECK(ncclGroupEnd());
      }
      if (first_stage_ && m + 1 < mbs) LoadBatch(m + 1, step);
    }

    // Backward, in the same micro-batch order, gradients flowing to earlier stages.
    if (last_stage_) {
      LossGrad(0, step);
    } else {
      NCCL_CHECK(ncclRecv(Grad(0), hidden_, ncclFloat, next, pp_, stream_));
    }
    for (int m = 0; m < mbs; ++m) {
      Backward(m, layer_spin_ns, overlap && m + 1 == mbs);
      const bool send = !first_stage_;
      const bool recv = !last_stage_ && m + 1 < mbs;
      if (send || recv) {
        NCCL_CHECK(ncclGroupStart());
        if (send) NCCL_CHECK(ncclSend(Grad(m), hidden_, ncclFloat, prev, pp_, stream_));
        if (recv) NCCL_CHECK(ncclRecv(Grad(m + 1), hidden_, ncclFloat, next, pp_, stream_));
        NCCL_CHECK(ncclGroupEnd());
      }
      if (last_stage_ && m + 1 < mbs) LossGrad(m + 1, step);
    }

    if (c_.sharded_optimizer) {
      ShardedUpdate();
      return;
    }
    // Data parallelism: sum, then scale to the average over the global batch.
    const int64_t nparams = lps_ * shard_;
    if (overlap) {
      // The optimizer waits for the last layer's all-reduce (reduce_stream_ runs them in order).
      CUDA_CHECK(cudaEventRecord(grads_ready_[lps_], reduce_stream_));
      CUDA_CHECK(cudaStreamWaitEvent(stream_, grads_ready_[lps_], 0));
    } else if (c_.dp > 1) {
      NCCL_CHECK(ncclAllReduce(grads_, grads_, nparams, ncclFloat, ncclSum, dp_, stream_));
    }
    FtUpdateBegin(ft_, stream_);  // a save from here to the next step's end would be torn
    LAUNCH(scale, nparams, grads_, AverageFactor(int64_t{c_.dp} * mbs), nparams);
    if (momentum_ != nullptr) {
      LAUNCH(momentum_step, nparams, params_, momentum_, grads_, kLearningRate, nparams);
    } else {
      LAUNCH(optimizer_step, nparams, params_, grads_, kLearningRate, nparams);
    }
    LAUNCH(count_steps, 1, opt_steps_, 1);
  }

  // Megatron's distributed optimizer: reduce-scatter the gradients so this DP rank holds the
  // sum of its slice, update that slice with the state it owns, all-gather the parameters.
  // Every collective is in place (NCCL's rule: the slice sits at dp_index * slice).
  void ShardedUpdate() {
    const int64_t begin = int64_t{co_.dp} * slice_;
    if (c_.dp > 1) {
      NCCL_CHECK(ncclReduceScatter(grads_, grads_ + begin, slice_, ncclFloat, ncclSum, dp_, stream_));
    }
    FtUpdateBegin(ft_, stream_);  // a save from here to the next step's end would be torn
    LAUNCH(scale, slice_, grads_ + begin, AverageFactor(int64_t{c_.dp} * c_.microbatches), slice_);
    LAUNCH(momentum_step, slice_, params_ + begin, momentum_, grads_ + begin, kLearningRate, slice_);
    LAUNCH(count_steps, 1, opt_steps_, 1);
    if (c_.dp > 1) NCCL_CHECK(ncclAllGather(params_ + begin, params_, slice_, ncclFloat, dp_, stream_));
  }

  const Config c_;
  const int rank_;
  const int local_rank_;
  Coord co_;
  int64_t lps_ = 0;
  int64_t shard_ = 0;
  int64_t hidden_ = 0;
  int64_t slice_ = 0;   // optimizer state elements on this rank (all of them unless sharded)
  int64_t padded_ = 0;  // length of params_ and grads_: dp slices when sharded
  bool first_stage_ = true;
  bool last_stage_ = true;

  ncclComm_t world_ = nullptr;
  ncclComm_t dp_ = nullptr;
  ncclComm_t tp_ = nullptr;
  ncclComm_t pp_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaStream_t reduce_stream_ = nullptr;     // --overlap-grad-reduce: the gradient all-reduces
  std::vector<cudaEvent_t> grads_ready_;     // [lps + 1]: a layer's gradient whole; the last: all reduced
  float* params_ = nullptr;  // [lps][shard], then zero padding up to padded_
  float* grads_ = nullptr;   // [lps][shard], then zero padding up to padded_
  float* acts_ = nullptr;    // [microbatch][lps + 1][hidden]: each layer's input, then the output
  float* part_ = nullptr;    // [hidden]: partial sums, tp all-reduced in place
  float* gbuf_ = nullptr;    // [2][hidden]: activation gradients of alternate micro-batches
  int* hang_flag_ = nullptr;
  int64_t* opt_steps_ = nullptr;  // [1]: the optimizer's update count (its checkpointed state)
  float* momentum_ = nullptr;     // [slice_]: --optimizer momentum's buffer (this rank's slice)
  FtStart ft_;
  std::vector<cudaEvent_t> step_ends_;     // --no-step-sync: the last steps' ends, oldest first
  std::vector<cudaEvent_t> spare_events_;  // reached, for reuse
};

}  // namespace trainsim

int main(int argc, char** argv) {
  using namespace trainsim;
  // Line-buffered even into a pipe, so a launcher shows progress as it happens.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  Config config;
  std::string error;
  switch (ParseArgs(argc, argv, &config, &error)) {
    case ParseResult::kHelp:
      std::fputs(HelpText(/*reference=*/false).c_str(), stdout);
      return 0;
    case ParseResult::kError:
      std::fprintf(stderr, "trainsim: error: %s (see --help)\n", error.c_str());
      return 2;
    case ParseResult::kOk:
      break;
  }
  const int rank = EnvInt("RANK", "SLURM_PROCID", 0);
  const int world = EnvInt("WORLD_SIZE", "SLURM_NTASKS", 1);
  const int local_rank = EnvInt("LOCAL_RANK", "SLURM_LOCALID", 0);
  g_rank = rank;
  if (config.fault_restart >= 0 && EnvInt("TORCHELASTIC_RESTART_COUNT", nullptr, 0) != config.fault_restart) {
    config.fault = FaultKind::kNone;  // --fault-restart: another launch's fault
  }
  if (!Finish(&config, world, &error)) {
    std::fprintf(stderr, "trainsim: error: %s (see --help)\n", error.c_str());
    return 2;
  }
  if (rank >= world) {
    std::fprintf(stderr, "trainsim: error: RANK=%d outside WORLD_SIZE=%d\n", rank, world);
    return 2;
  }
  const char* addr_env = std::getenv("MASTER_ADDR");
  const std::string master_addr = addr_env != nullptr && *addr_env != '\0' ? addr_env : "127.0.0.1";
  int port = config.bootstrap_port;
  if (port == 0) port = EnvInt("MASTER_PORT", nullptr, 0);
  if (world > 1 && (port <= 0 || port > 65535)) {
    std::fprintf(stderr, "trainsim: error: MASTER_PORT is not set (or --bootstrap-port) for a world of %d\n",
                 world);
    return 2;
  }

  Trainer trainer(config, rank, local_rank);
  trainer.Init(master_addr, port);
  if (config.verbose) {
    const Coord co = CoordOf(config, rank);
    std::printf("trainsim rank=%d start world=%d dp=%d tp=%d pp=%d layers/stage=%d shard=%lld hidden=%lld\n",
                rank, world, co.dp, co.tp, co.pp, config.layers_per_stage(),
                static_cast<long long>(config.shard_len()), static_cast<long long>(config.hidden));
  }
  trainer.RegisterAndRestore();
  trainer.Run();
  trainer.CheckOptimizerSteps();
  const uint64_t checksum = trainer.Checksum();
  std::printf("%s\n", ChecksumLine(config, rank, checksum).c_str());
  trainer.Shutdown();
  return 0;
}

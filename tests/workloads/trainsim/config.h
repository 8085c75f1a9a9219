// trainsim's command line: one table of flags shared by trainsim and trainsim_reference, so
// both read a configuration the same way. Plain C++, no CUDA.
#ifndef TRAINSIM_CONFIG_H_
#define TRAINSIM_CONFIG_H_

#include <cstdint>
#include <string>

namespace trainsim {

enum class FaultKind { kNone, kHangKernel, kHangHost, kCrashKill, kCrashSegv, kCrashAbort, kSlow, kPause, kSdc, kExit, kFail };

// --fault-rank all: every rank faults.
inline constexpr int kAllRanks = -1;

// What trainsim asks of libft.so when it is loaded (--ft): kRestore registers the state and
// restores the planned checkpoint at start; kSave registers (saves work) but starts from
// scratch without asking for a plan (a run with no ftworker on the node); kOff calls nothing,
// as if libft.so were absent.
enum class FtMode { kRestore, kSave, kOff };

const char* FtModeName(FtMode mode);

const char* FaultName(FaultKind kind);

// The optimizer (--optimizer): plain SGD, or SGD with momentum, whose per-parameter momentum
// buffer is the optimizer state a distributed optimizer shards. kDefault: momentum with
// --sharded-optimizer (there must be a state to shard), else SGD; Finish() resolves it.
enum class Optimizer { kDefault, kSgd, kMomentum };

// Where a step's compute (--compute-ms, and what --fault slow and --jitter do to it) runs: all
// at the step's start, before the forward pass (the default), or spread over the backward
// pass's layers, right before the gradient all-reduce that makes every rank's step look equal.
enum class ComputeAt { kForward, kBackward };

const char* OptimizerName(Optimizer optimizer);

struct Config {
  int dp = 0;  // 0: WORLD_SIZE / (tp * pp)
  int tp = 1;
  int pp = 1;
  int layers = 4;
  int64_t param_bytes = 2 << 20;  // per rank
  int64_t hidden = 16384;         // activation elements
  int microbatches = 1;
  int steps = 20;
  double compute_ms = 2.0;
  uint64_t seed = 1;
  bool verbose = false;
  // Synchronize the stream before ft_step_done (the default). Off (--no-step-sync, or
  // TRAINSIM_STEP_SYNC=0 in the environment): the host queues step after step and calls
  // ft_step_done with the step's work still queued, as a PyTorch loop that never calls .item()
  // does; only CUDA's launch queue holds it back.
  bool step_sync = true;
  int bootstrap_port = 0;  // 0: MASTER_PORT
  FaultKind fault = FaultKind::kNone;
  int fault_rank = 0;  // kAllRanks: every rank
  int fault_step = 0;
  int fault_restart = -1;  // -1: every launch; K: only in the group TORCHELASTIC_RESTART_COUNT=K
  double slow_factor = 1.5;
  int slow_steps = 0;      // slow: for this many steps, then as fast as before (0: to the end)
  double jitter = 0;       // every step's compute times a uniform draw in [1 - jitter, 1 + jitter]
  double pause_s = 20.0;
  FtMode ft = FtMode::kRestore;
  Optimizer optimizer = Optimizer::kDefault;
  // Megatron's distributed optimizer: each DP rank owns 1/dp of the optimizer state and updates
  // that slice of the parameters, then an all-gather makes the parameters whole again.
  bool sharded_optimizer = false;
  ComputeAt compute_at = ComputeAt::kForward;
  // DDP's overlap: each layer's gradient all-reduce starts on a second stream as soon as the
  // backward pass has produced it, while the backward pass goes on with the layers before.
  bool overlap_grad_reduce = false;

  // Derived by Finish().
  int world() const { return dp * tp * pp; }
  int layers_per_stage() const { return layers / pp; }
  // Floats of one layer's parameter shard on one rank (S); a layer has S * tp in all.
  int64_t shard_len() const { return param_bytes / 4 / layers_per_stage(); }
  // Parameters of one rank (all its layers' shards) and, with --sharded-optimizer, the slice of
  // them each DP rank updates: ceil(rank_params / dp); the last slice is padded with zeros.
  int64_t rank_params() const { return layers_per_stage() * shard_len(); }
  int64_t optimizer_slice() const {
    return sharded_optimizer ? (rank_params() + dp - 1) / dp : rank_params();
  }
};

enum class ParseResult { kOk, kHelp, kError };

// Parses argv into *config ("--flag value" or "--flag=value"). trainsim_reference accepts
// the same flags (it ignores those that do not change the result). On kError, *error says why.
ParseResult ParseArgs(int argc, char** argv, Config* config, std::string* error);

// Fills dp from world_size when it was not given and checks the whole configuration
// (world_size <= 0: no launcher world to match). Returns false with *error on a bad one.
bool Finish(Config* config, int world_size, std::string* error);

// reference: the text of trainsim_reference, which lists only the flags that matter to it.
std::string HelpText(bool reference);

// Rank order (Megatron's default "tp-dp-pp"): tp fastest, then dp, then pp.
struct Coord {
  int dp = 0;
  int tp = 0;
  int pp = 0;
};
inline Coord CoordOf(const Config& c, int rank) {
  return Coord{(rank / c.tp) % c.dp, rank % c.tp, rank / (c.tp * c.dp)};
}
// The line trainsim prints for a rank at the end (trainsim_reference prints the same).
std::string ChecksumLine(const Config& config, int rank, uint64_t checksum);

inline int RankOf(const Config& c, int dp, int tp, int pp) { return tp + c.tp * (dp + c.dp * pp); }

}  // namespace trainsim

#endif  // TRAINSIM_CONFIG_H_

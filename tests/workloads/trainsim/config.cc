#include "config.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "trainsim_math.h"

namespace trainsim {

namespace {

struct FaultEntry {
  const char* name;
  FaultKind kind;
};
constexpr FaultEntry kFaults[] = {
    {"none", FaultKind::kNone},          {"hang-kernel", FaultKind::kHangKernel},
    {"hang-host", FaultKind::kHangHost}, {"crash-kill", FaultKind::kCrashKill},
    {"crash-segv", FaultKind::kCrashSegv}, {"crash-abort", FaultKind::kCrashAbort},
    {"slow", FaultKind::kSlow},          {"pause", FaultKind::kPause},
    {"sdc", FaultKind::kSdc},            {"exit", FaultKind::kExit},
    {"fail", FaultKind::kFail},
};

struct FtModeEntry {
  const char* name;
  FtMode mode;
};
constexpr FtModeEntry kFtModes[] = {
    {"restore", FtMode::kRestore}, {"save", FtMode::kSave}, {"off", FtMode::kOff}};

struct OptimizerEntry {
  const char* name;
  Optimizer optimizer;
};
constexpr OptimizerEntry kOptimizers[] = {{"sgd", Optimizer::kSgd}, {"momentum", Optimizer::kMomentum}};

bool ParseInt64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 0);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// Sizes take an optional unit: 4mb, 512k, 2MiB (powers of 1024).
bool ParseBytes(const std::string& s, int64_t* out) {
  size_t i = 0;
  while (i < s.size() && (s[i] >= '0' && s[i] <= '9')) ++i;
  int64_t n = 0;
  if (!ParseInt64(s.substr(0, i), &n)) return false;
  std::string unit;
  for (char c : s.substr(i)) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int64_t mul = 1;
  if (unit.empty() || unit == "b") mul = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mul = int64_t{1} << 10;
  else if (unit == "m" || unit == "mb" || unit == "mib") mul = int64_t{1} << 20;
  else if (unit == "g" || unit == "gb" || unit == "gib") mul = int64_t{1} << 30;
  else return false;
  *out = n * mul;
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

struct Flag {
  const char* name;
  const char* arg;  // nullptr: a switch
  bool reference;   // also accepted by trainsim_reference
  const char* help;
  std::function<bool(Config*, const std::string&)> set;
};

template <typename T>
std::function<bool(Config*, const std::string&)> IntFlag(T Config::*field) {
  return [field](Config* c, const std::string& v) {
    int64_t x = 0;
    if (!ParseInt64(v, &x) || x < INT32_MIN || x > INT32_MAX) return false;
    c->*field = static_cast<T>(x);
    return true;
  };
}

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      {"--dp", "N", true, "data-parallel size (default: WORLD_SIZE / (tp * pp); 1 for the reference)", IntFlag(&Config::dp)},
      {"--tp", "N", true, "tensor-parallel size (default 1)", IntFlag(&Config::tp)},
      {"--pp", "N", true, "pipeline-parallel stages (default 1)", IntFlag(&Config::pp)},
      {"--layers", "N", true, "layers in the model, split evenly over pp stages (default 4)",
       IntFlag(&Config::layers)},
      {"--param-bytes", "SIZE", true,
       "parameter bytes per rank, e.g. 2mb (default 2mb); a layer has tp shards of\n"
       "(param-bytes / 4 / layers-per-stage) floats",
       [](Config* c, const std::string& v) { return ParseBytes(v, &c->param_bytes); }},
      {"--hidden", "N", true, "activation elements per micro-batch (default 16384)",
       [](Config* c, const std::string& v) { return ParseInt64(v, &c->hidden); }},
      {"--microbatches", "N", true, "micro-batches per step (default 1)", IntFlag(&Config::microbatches)},
      {"--steps", "N", true, "training steps (default 20)", IntFlag(&Config::steps)},
      {"--compute-ms", "MS", false, "extra compute kernel time per step in ms (default 2)",
       [](Config* c, const std::string& v) { return ParseDouble(v, &c->compute_ms); }},
      {"--seed", "N", true, "seed of parameters and data (default 1)",
       [](Config* c, const std::string& v) {
         int64_t x = 0;
         if (!ParseInt64(v, &x)) return false;
         c->seed = static_cast<uint64_t>(x);
         return true;
       }},
      {"--optimizer", "NAME", true,
       "sgd (w -= lr*g) or momentum (m = m/2 + lr*g; w -= m), both on the\n"
       "byte grid (default: momentum with --sharded-optimizer, else sgd)",
       [](Config* c, const std::string& v) {
         for (const OptimizerEntry& o : kOptimizers) {
           if (v == o.name) {
             c->optimizer = o.optimizer;
             return true;
           }
         }
         return false;
       }},
      {"--sharded-optimizer", nullptr, true,
       "shard the optimizer state over the DP ranks (Megatron's distributed\n"
       "optimizer): each updates 1/dp of the parameters, an all-gather makes them\n"
       "whole; the results equal the unsharded run's (same --optimizer)",
       [](Config* c, const std::string&) { c->sharded_optimizer = true; return true; }},
      {"--compute-at", "PHASE", false,
       "where the step's compute runs: forward (default: all at the step's start)\n"
       "or backward (spread over the backward pass's layers, right before the\n"
       "gradient all-reduce)",
       [](Config* c, const std::string& v) {
         if (v == "forward") c->compute_at = ComputeAt::kForward;
         else if (v == "backward") c->compute_at = ComputeAt::kBackward;
         else return false;
         return true;
       }},
      {"--overlap-grad-reduce", nullptr, false,
       "all-reduce each layer's gradient on a second stream as soon as the backward\n"
       "pass has produced it, overlapping the rest of the backward pass (DDP's buckets)",
       [](Config* c, const std::string&) { c->overlap_grad_reduce = true; return true; }},
      {"--no-step-sync", nullptr, false,
       "call ft_step_done with the step's work still queued on the stream (no\n"
       "synchronize per step, as a PyTorch loop without .item()); also\n"
       "TRAINSIM_STEP_SYNC=0 in the environment",
       [](Config* c, const std::string&) { c->step_sync = false; return true; }},
      {"--verbose", nullptr, false, "print one line per step with its wall time",
       [](Config* c, const std::string&) { c->verbose = true; return true; }},
      {"--bootstrap-port", "PORT", false,
       "TCP port rank 0 serves the NCCL unique id on (default: MASTER_PORT;\n"
       "under torchrun, whose agent already listens on MASTER_PORT, pick another)",
       IntFlag(&Config::bootstrap_port)},
      {"--fault", "KIND", false,
       "inject a fault: hang-kernel, hang-host, crash-kill, crash-segv,\n"
       "crash-abort, exit, fail, slow, pause, sdc (see below)",
       [](Config* c, const std::string& v) {
         for (const FaultEntry& f : kFaults) {
           if (v == f.name) {
             c->fault = f.kind;
             return true;
           }
         }
         return false;
       }},
      {"--fault-rank", "R", false, "the rank that faults, or all (default 0)",
       [](Config* c, const std::string& v) {
         if (v == "all") {
           c->fault_rank = kAllRanks;
           return true;
         }
         return IntFlag(&Config::fault_rank)(c, v) && c->fault_rank >= 0;
       }},
      {"--fault-step", "S", false, "the step at which it faults (default 0)", IntFlag(&Config::fault_step)},
      {"--fault-restart", "K", false,
       "fault only in the group a launcher started K-th (TORCHELASTIC_RESTART_COUNT=K,\n"
       "unset counts as 0): a restart in place then runs clean (default: every launch)",
       [](Config* c, const std::string& v) { return IntFlag(&Config::fault_restart)(c, v) && c->fault_restart >= 0; }},
      {"--slow-factor", "F", false, "slow: compute takes F times longer from then on (default 1.5)",
       [](Config* c, const std::string& v) { return ParseDouble(v, &c->slow_factor); }},
      {"--slow-steps", "N", false, "slow: only for N steps, then back to full speed (default 0: to the end)",
       [](Config* c, const std::string& v) { return IntFlag(&Config::slow_steps)(c, v) && c->slow_steps >= 0; }},
      {"--jitter", "J", false,
       "every step's compute takes a factor drawn uniformly from [1-J, 1+J] (per rank and\n"
       "step, reproducible; default 0): a healthy job's noise",
       [](Config* c, const std::string& v) { return ParseDouble(v, &c->jitter) && c->jitter >= 0 && c->jitter < 1; }},
      {"--pause-s", "T", false, "pause: host pause in seconds at the fault step (default 20)",
       [](Config* c, const std::string& v) { return ParseDouble(v, &c->pause_s); }},
      {"--ft", "MODE", false,
       "with libft.so loaded: restore (default: register parameters and optimizer\n"
       "state, restore the planned checkpoint at start), save (register, start from\n"
       "scratch: a run without an ftworker), off (call nothing of ft)",
       [](Config* c, const std::string& v) {
         for (const FtModeEntry& m : kFtModes) {
           if (v == m.name) {
             c->ft = m.mode;
             return true;
           }
         }
         return false;
       }},
  };
  return flags;
}

}  // namespace

const char* FaultName(FaultKind kind) {
  for (const FaultEntry& f : kFaults) {
    if (f.kind == kind) return f.name;
  }
  return "?";
}

const char* OptimizerName(Optimizer optimizer) {
  for (const OptimizerEntry& o : kOptimizers) {
    if (o.optimizer == optimizer) return o.name;
  }
  return "default";
}

const char* FtModeName(FtMode mode) {
  for (const FtModeEntry& m : kFtModes) {
    if (m.mode == mode) return m.name;
  }
  return "?";
}

std::string HelpText(bool reference) {
  std::string s;
  if (reference) {
    s += "usage: trainsim_reference --dp N [--tp N] [--pp N] [options]\n\n"
         "Computes, in one process and without a GPU, the checksum every rank of a trainsim run\n"
         "with the same model flags must print, in trainsim's format. trainsim's other flags\n"
         "(faults, timing, bootstrap) are accepted and ignored, so one command line serves both.\n\n";
  } else {
    s += "usage: trainsim [options]   (one process per rank, started by a launcher)\n\n"
         "A training step on dp x tp x pp ranks with deterministic synthetic parameters, for\n"
         "testing hang and slowdown detection. Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,\n"
         "MASTER_PORT as torchrun sets them (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID when\n"
         "RANK is unset). Rank order is Megatron's default tp-dp-pp: tp varies fastest, then dp,\n"
         "then pp: rank = tp_index + tp * (dp_index + dp * pp_index).\n\n"
         "Prints, per rank at the end:\n"
         "  trainsim rank=<r> dp=<i> tp=<j> pp=<k> steps=<n> checksum=<fnv1a64 of the params>\n\n";
  }
  s += "options:\n";
  for (const Flag& f : Flags()) {
    if (reference && !f.reference) continue;
    std::string left = std::string("  ") + f.name + (f.arg ? std::string(" ") + f.arg : "");
    if (left.size() < 24) left.resize(24, ' ');
    else left += "\n                        ";
    std::string help = f.help;
    for (size_t pos = 0; (pos = help.find('\n', pos)) != std::string::npos; pos += 25) {
      help.insert(pos + 1, 24, ' ');
    }
    s += left + help + "\n";
  }
  s += "  --help                print this text\n";
  if (!reference) {
    s += "\nfaults (on --fault-rank at --fault-step; --fault-rank all: every rank):\n"
         "  hang-kernel   launch a kernel that never finishes (spins on a flag never set)\n"
         "  hang-host     stop issuing work and sleep forever (like a dataloader hang)\n"
         "  crash-kill    raise(SIGKILL)\n"
         "  crash-segv    store to an inaccessible page (SIGSEGV)\n"
         "  crash-abort   abort()\n"
         "  exit          exit(0): the rank's program ends cleanly there (its peers block)\n"
         "  fail          print an error and exit(1), as an uncaught exception ends a Python\n"
         "                rank (a CUDA OOM, a NaN check): exit handlers run, its peers block\n"
         "  slow          from the fault step on (for --slow-steps steps, or to the end), compute takes\n"
         "                --slow-factor times longer\n"
         "  pause         busy host work (CPU, no CUDA/NCCL call) for --pause-s seconds once, then carry on\n"
         "  sdc           silent data corruption: flip one bit of one parameter on the device, train on\n"
         "                (its data-parallel replicas now disagree)\n"
         "Peers of a faulting rank simply block in their collectives.\n"
         "\nwith libft.so (LD_PRELOAD), unless --ft off: registers each layer's parameters\n"
         "(layers.<global layer>.weight) and the optimizer's step counter (optimizer.steps),\n"
         "with --optimizer momentum its momentum buffer (optimizer.momentum; with\n"
         "--sharded-optimizer each DP rank's slice, optimizer.momentum.dp<i>),\n"
         "reports every completed step (ft_step_done), and with --ft restore starts at the\n"
         "restored step, printing 'trainsim rank=<r> restored step=<s>'; a failed restore exits 1.\n"
         "\nexit status: 0 done, 1 CUDA/NCCL/bootstrap/restore error, 2 bad command line\n";
  }
  return s;
}

ParseResult ParseArgs(int argc, char** argv, Config* config, std::string* error) {
  // The environment's default, so a suite runs unchanged in the no-sync mode.
  if (const char* sync = getenv("TRAINSIM_STEP_SYNC"); sync != nullptr && std::string(sync) == "0") {
    config->step_sync = false;
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return ParseResult::kHelp;
    std::string value;
    bool has_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const Flag* flag = nullptr;
    for (const Flag& f : Flags()) {
      if (arg == f.name) flag = &f;
    }
    if (flag == nullptr) {
      *error = "unknown flag '" + std::string(argv[i]) + "'";
      return ParseResult::kError;
    }
    if (flag->arg == nullptr) {
      if (has_value) {
        *error = std::string(flag->name) + " takes no value";
        return ParseResult::kError;
      }
    } else if (!has_value) {
      if (i + 1 >= argc) {
        *error = std::string(flag->name) + " needs a value (" + flag->arg + ")";
        return ParseResult::kError;
      }
      value = argv[++i];
    }
    if (!flag->set(config, value)) {
      *error = "bad value '" + value + "' for " + flag->name;
      return ParseResult::kError;
    }
  }
  return ParseResult::kOk;
}

bool Finish(Config* c, int world_size, std::string* error) {
  auto fail = [error](const std::string& msg) {
    *error = msg;
    return false;
  };
  if (c->tp < 1 || c->pp < 1 || c->dp < 0) return fail("--dp, --tp and --pp must be positive");
  if (c->dp == 0) {
    if (world_size <= 0) {
      c->dp = 1;
    } else {
      if (world_size % (c->tp * c->pp) != 0) {
        return fail("WORLD_SIZE=" + std::to_string(world_size) + " is not a multiple of tp*pp=" +
                    std::to_string(c->tp * c->pp));
      }
      c->dp = world_size / (c->tp * c->pp);
    }
  }
  if (world_size > 0 && c->world() != world_size) {
    return fail("dp*tp*pp=" + std::to_string(c->world()) + " but WORLD_SIZE=" + std::to_string(world_size));
  }
  if (c->layers < 1) return fail("--layers must be positive");
  if (c->layers % c->pp != 0) {
    return fail("--layers=" + std::to_string(c->layers) + " is not a multiple of --pp=" + std::to_string(c->pp));
  }
  if (c->microbatches < 1) return fail("--microbatches must be positive");
  if (int64_t{c->dp} * c->microbatches > kMaxGlobalBatch) {
    return fail("dp * microbatches must be at most " + std::to_string(kMaxGlobalBatch) +
                " (gradient sums must stay exact)");
  }
  if (c->hidden < 1 || c->hidden > (int64_t{1} << 30)) return fail("--hidden out of range");
  if (c->param_bytes < 0 || c->shard_len() < 1) {
    return fail("--param-bytes too small: need at least 4 bytes per layer on a rank (" +
                std::to_string(4 * c->layers_per_stage()) + ")");
  }
  if (c->steps < 0) return fail("--steps must be >= 0");
  if (c->compute_ms < 0) return fail("--compute-ms must be >= 0");
  if (c->bootstrap_port < 0 || c->bootstrap_port > 65535) return fail("--bootstrap-port out of range");
  if (c->fault != FaultKind::kNone) {
    if (c->fault_rank != kAllRanks && (c->fault_rank < 0 || c->fault_rank >= c->world())) {
      return fail("--fault-rank=" + std::to_string(c->fault_rank) + " outside the world of " +
                  std::to_string(c->world()));
    }
    if (c->fault_step < 0) return fail("--fault-step must be >= 0");
  }
  if (c->overlap_grad_reduce && c->sharded_optimizer) {
    return fail("--overlap-grad-reduce all-reduces whole layers: not with --sharded-optimizer's reduce-scatter");
  }
  if (c->optimizer == Optimizer::kDefault) {
    c->optimizer = c->sharded_optimizer ? Optimizer::kMomentum : Optimizer::kSgd;
  }
  if (c->sharded_optimizer && c->optimizer == Optimizer::kSgd) {
    return fail("--sharded-optimizer needs an optimizer with state (--optimizer momentum): plain SGD "
                "has nothing to shard");
  }
  if (c->slow_factor <= 0) return fail("--slow-factor must be positive");
  if (c->pause_s < 0) return fail("--pause-s must be >= 0");
  return true;
}

std::string ChecksumLine(const Config& c, int rank, uint64_t checksum) {
  const Coord co = CoordOf(c, rank);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "trainsim rank=%d dp=%d tp=%d pp=%d steps=%d checksum=%016" PRIx64,
                rank, co.dp, co.tp, co.pp, c.steps, checksum);
  return buf;
}

}  // namespace trainsim

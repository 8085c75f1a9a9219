// Unit tests of trainsim's arithmetic, its one-process reference, its flags and the CPU
// kernel library gpusim loads.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "config.h"
#include "faults.h"
#include "gpusim/kernels.h"
#include "reference.h"
#include "trainsim_math.h"

namespace trainsim {
namespace {

Config Make(int dp, int tp, int pp, int layers, int64_t param_bytes, int mbs, int steps) {
  Config c;
  c.dp = dp;
  c.tp = tp;
  c.pp = pp;
  c.layers = layers;
  c.param_bytes = param_bytes;
  c.microbatches = mbs;
  c.steps = steps;
  c.hidden = 64;
  std::string error;
  EXPECT_TRUE(Finish(&c, 0, &error)) << error;
  return c;
}

TEST(TrainsimMath, Fnv1a64KnownValues) {
  EXPECT_EQ(Fnv1a64("", 0), 0xCBF29CE484222325ull);
  EXPECT_EQ(Fnv1a64("a", 1), 0xAF63DC4C8601EC8Cull);
  EXPECT_EQ(Fnv1a64("foobar", 6), 0x85944171F73967E8ull);
}

TEST(TrainsimMath, SumsStayExact) {
  // The largest gradient sum: 255 per micro-batch, kMaxGlobalBatch of them, below 2^24.
  static_assert(255 * kMaxGlobalBatch < (1 << 24));
  float sum = 0;
  for (int64_t i = 0; i < kMaxGlobalBatch; ++i) sum += 255.0f;
  EXPECT_EQ(static_cast<int64_t>(sum), 255 * kMaxGlobalBatch);
}

TEST(TrainsimMath, ValuesAreBytes) {
  for (int64_t i = 0; i < 10000; ++i) {
    const float v = ByteValue(12345, i);
    EXPECT_EQ(v, static_cast<float>(static_cast<int>(v)));
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 256.0f);
  }
}

// The tensor-parallel identity the whole design rests on: partial sums of any shard split,
// each reduced mod 256 and then added as floats (in any order), give the unsharded result.
TEST(TrainsimMath, ShardedPartialSumsEqualTheFullSum) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t hidden = 1 + rng() % 97;
    const int tp = 1 + rng() % 8;
    const int64_t shard = 1 + rng() % 300;
    const int64_t full = shard * tp;
    std::vector<float> w(full), x(hidden), g(hidden);
    for (auto& v : w) v = static_cast<float>(rng() % 256);
    for (auto& v : x) v = static_cast<float>(rng() % 256);
    for (auto& v : g) v = static_cast<float>(rng() % 256);
    std::vector<float> ref_f(hidden), ref_b(hidden), sum_f(hidden, 0.0f), sum_b(hidden, 0.0f);
    std::vector<float> part(hidden);
    for (int64_t a = 0; a < hidden; ++a) {
      forward_partial_at(a, w.data(), x.data(), ref_f.data(), 0, full, hidden);
      backward_input_at(a, w.data(), g.data(), ref_b.data(), 0, full, hidden);
    }
    std::vector<int> order(tp);
    for (int j = 0; j < tp; ++j) order[j] = tp - 1 - j;  // reversed: order must not matter
    for (int j : order) {
      for (int64_t a = 0; a < hidden; ++a) {
        forward_partial_at(a, w.data() + j * shard, x.data(), part.data(), j * shard, shard, hidden);
        sum_f[a] += part[a];
        backward_input_at(a, w.data() + j * shard, g.data(), part.data(), j * shard, shard, hidden);
        sum_b[a] += part[a];
      }
    }
    for (int64_t a = 0; a < hidden; ++a) {
      ASSERT_EQ(Activation(sum_f[a], 3), Activation(ref_f[a], 3)) << "a=" << a;
      ASSERT_EQ(ActivationGrad(sum_b[a], 3), ActivationGrad(ref_b[a], 3)) << "a=" << a;
    }
  }
}

TEST(TrainsimMath, OptimizerChangesParametersAndStaysOnTheGrid) {
  std::vector<float> w = {0, 1, 255, 100}, grad = {0, 8, 4, 1023};
  for (int64_t i = 0; i < 4; ++i) optimizer_step_at(i, w.data(), grad.data(), kLearningRate);
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_EQ(w[1], 255.0f);  // 1 - 2 wraps
  EXPECT_EQ(w[2], 254.0f);
  EXPECT_EQ(w[3], static_cast<float>((100u - 255u) & 255u));
}

TEST(TrainsimMath, MomentumKeepsStateAndStaysOnTheGrid) {
  std::vector<float> w = {10, 10, 0}, m = {0, 6, 255}, grad = {8, 8, 4};
  for (int64_t i = 0; i < 3; ++i) momentum_step_at(i, w.data(), m.data(), grad.data(), kLearningRate);
  EXPECT_EQ(m[0], 2.0f);   // 0/2 + 2
  EXPECT_EQ(w[0], 8.0f);
  EXPECT_EQ(m[1], 5.0f);   // 6/2 + 2: the state carries over
  EXPECT_EQ(w[1], 5.0f);
  EXPECT_EQ(m[2], 128.0f); // 127 + 1
  EXPECT_EQ(w[2], 128.0f); // 0 - 128 wraps
  // A second step with no gradient still moves the weights: the state is real.
  std::vector<float> zero = {0, 0, 0};
  momentum_step_at(0, w.data(), m.data(), zero.data(), kLearningRate);
  EXPECT_EQ(m[0], 1.0f);
  EXPECT_EQ(w[0], 7.0f);
}

// Momentum changes the model; --sharded-optimizer picks it and (in the reference, which
// computes the unsharded model) changes nothing else: trainsim's sharded ranks must match it.
TEST(TrainsimReference, ShardedOptimizerComputesTheMomentumModel) {
  Config sgd = Make(2, 1, 1, 2, 4096, 1, 3);
  Config momentum = sgd;
  momentum.optimizer = Optimizer::kMomentum;
  Config sharded = sgd;
  sharded.optimizer = Optimizer::kDefault;
  sharded.sharded_optimizer = true;
  std::string error;
  ASSERT_TRUE(Finish(&sharded, 0, &error)) << error;
  EXPECT_EQ(sharded.optimizer, Optimizer::kMomentum);
  const ReferenceResult a = RunReference(sgd), b = RunReference(momentum), c = RunReference(sharded);
  EXPECT_NE(a.model_checksum, b.model_checksum);
  EXPECT_EQ(b.model_checksum, c.model_checksum);
  EXPECT_EQ(b.rank_checksums, c.rank_checksums);
}

// The reference's results depend only on the global batch, not on how it is split between
// data parallelism and micro-batches.
TEST(TrainsimReference, DataParallelEqualsMicrobatches) {
  const ReferenceResult a = RunReference(Make(2, 1, 1, 2, 4096, 1, 3));
  const ReferenceResult b = RunReference(Make(1, 1, 1, 2, 4096, 2, 3));
  ASSERT_EQ(a.rank_checksums.size(), 2u);
  ASSERT_EQ(b.rank_checksums.size(), 1u);
  EXPECT_EQ(a.rank_checksums[0], a.rank_checksums[1]);
  EXPECT_EQ(a.rank_checksums[0], b.rank_checksums[0]);
  EXPECT_EQ(a.model_checksum, b.model_checksum);
  // A non-power-of-two global batch splits the same way too.
  EXPECT_EQ(RunReference(Make(3, 1, 1, 2, 4096, 1, 2)).model_checksum,
            RunReference(Make(1, 1, 1, 2, 4096, 3, 2)).model_checksum);
}

// The same model (layers x parameters per layer) gives the same parameters whatever the tp
// and pp split; param-bytes is per rank, so it shrinks as the model is split.
TEST(TrainsimReference, ModelIndependentOfTensorAndPipelineSplit) {
  const uint64_t base = RunReference(Make(1, 1, 1, 4, 4 * 1024 * 4, 1, 3)).model_checksum;
  EXPECT_EQ(RunReference(Make(1, 2, 1, 4, 4 * 1024 * 2, 1, 3)).model_checksum, base);
  EXPECT_EQ(RunReference(Make(1, 1, 2, 4, 2 * 1024 * 4, 1, 3)).model_checksum, base);
  EXPECT_EQ(RunReference(Make(2, 2, 2, 4, 2 * 1024 * 2, 1, 3)).model_checksum,
            RunReference(Make(1, 1, 1, 4, 4 * 1024 * 4, 2, 3)).model_checksum);
}

TEST(TrainsimReference, RankChecksumsDifferByShardAndAgreeAcrossReplicas) {
  const Config c = Make(2, 2, 2, 4, 8192, 1, 2);
  const ReferenceResult r = RunReference(c);
  ASSERT_EQ(r.rank_checksums.size(), 8u);
  for (int rank = 0; rank < 8; ++rank) {
    const Coord co = CoordOf(c, rank);
    EXPECT_EQ(RankOf(c, co.dp, co.tp, co.pp), rank);
    const int replica = RankOf(c, 1 - co.dp, co.tp, co.pp);
    EXPECT_EQ(r.rank_checksums[rank], r.rank_checksums[replica]);
    for (int other = 0; other < 8; ++other) {
      const Coord oc = CoordOf(c, other);
      if (oc.tp != co.tp || oc.pp != co.pp) {
        EXPECT_NE(r.rank_checksums[rank], r.rank_checksums[other]);
      }
    }
  }
}

TEST(TrainsimReference, TrainingChangesParametersAndSeedMatters) {
  Config c = Make(1, 1, 1, 2, 4096, 1, 0);
  const uint64_t initial = RunReference(c).model_checksum;
  c.steps = 1;
  const uint64_t one = RunReference(c).model_checksum;
  c.steps = 2;
  const uint64_t two = RunReference(c).model_checksum;
  EXPECT_NE(initial, one);
  EXPECT_NE(one, two);
  c.seed = 2;
  EXPECT_NE(RunReference(c).model_checksum, two);
}

TEST(TrainsimConfig, RankOrderIsTpDpPp) {
  const Config c = Make(2, 2, 2, 2, 4096, 1, 1);
  const Coord r5 = CoordOf(c, 5);  // 5 = 1 + 2 * (0 + 2 * 1)
  EXPECT_EQ(r5.tp, 1);
  EXPECT_EQ(r5.dp, 0);
  EXPECT_EQ(r5.pp, 1);
  EXPECT_EQ(ChecksumLine(c, 5, 0xABCull), "trainsim rank=5 dp=0 tp=1 pp=1 steps=1 checksum=0000000000000abc");
}

ParseResult Parse(std::vector<std::string> args, Config* c, std::string* error) {
  std::vector<char*> argv = {const_cast<char*>("trainsim")};
  for (auto& a : args) argv.push_back(a.data());
  return ParseArgs(static_cast<int>(argv.size()), argv.data(), c, error);
}

TEST(TrainsimConfig, Flags) {
  Config c;
  std::string error;
  ASSERT_EQ(Parse({"--tp", "2", "--param-bytes=3mb", "--fault", "slow", "--slow-factor", "2.5", "--verbose"}, &c, &error),
            ParseResult::kOk)
      << error;
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.param_bytes, 3 << 20);
  EXPECT_EQ(c.fault, FaultKind::kSlow);
  EXPECT_EQ(c.slow_factor, 2.5);
  EXPECT_TRUE(c.verbose);
  EXPECT_EQ(Parse({"--bogus"}, &c, &error), ParseResult::kError);
  EXPECT_NE(error.find("--bogus"), std::string::npos);
  EXPECT_EQ(Parse({"--fault", "melt"}, &c, &error), ParseResult::kError);
  EXPECT_EQ(Parse({"--steps"}, &c, &error), ParseResult::kError);
  EXPECT_EQ(Parse({"--steps", "x"}, &c, &error), ParseResult::kError);
  EXPECT_EQ(Parse({"--help"}, &c, &error), ParseResult::kHelp);
}

TEST(TrainsimConfig, OptimizerAndShardedOptimizer) {
  Config c;
  std::string error;
  ASSERT_EQ(Parse({}, &c, &error), ParseResult::kOk) << error;
  ASSERT_TRUE(Finish(&c, 2, &error)) << error;
  EXPECT_EQ(c.optimizer, Optimizer::kSgd);
  EXPECT_FALSE(c.sharded_optimizer);
  EXPECT_EQ(c.optimizer_slice(), c.rank_params());

  Config s;
  ASSERT_EQ(Parse({"--sharded-optimizer", "--param-bytes", "40004", "--layers", "1"}, &s, &error), ParseResult::kOk)
      << error;
  ASSERT_TRUE(Finish(&s, 3, &error)) << error;
  EXPECT_TRUE(s.sharded_optimizer);
  EXPECT_EQ(s.optimizer, Optimizer::kMomentum);
  EXPECT_EQ(s.rank_params(), 10001);
  EXPECT_EQ(s.optimizer_slice(), 3334);  // ceil(10001 / 3): the last slice is padded

  Config bad;
  ASSERT_EQ(Parse({"--sharded-optimizer", "--optimizer", "sgd"}, &bad, &error), ParseResult::kOk) << error;
  EXPECT_FALSE(Finish(&bad, 2, &error));
  EXPECT_NE(error.find("--sharded-optimizer"), std::string::npos) << error;
  EXPECT_EQ(Parse({"--optimizer", "adam"}, &bad, &error), ParseResult::kError);
  EXPECT_NE(HelpText(true).find("--sharded-optimizer"), std::string::npos);  // the reference takes it
}

// Where the compute runs and whether gradients are reduced during the backward pass: trainsim's
// flags only (the reference's model does not depend on them).
TEST(TrainsimConfig, ComputePhaseAndOverlappedGradientReduce) {
  Config c;
  std::string error;
  ASSERT_EQ(Parse({}, &c, &error), ParseResult::kOk) << error;
  EXPECT_EQ(c.compute_at, ComputeAt::kForward);
  EXPECT_FALSE(c.overlap_grad_reduce);
  ASSERT_EQ(Parse({"--compute-at", "backward", "--overlap-grad-reduce"}, &c, &error), ParseResult::kOk) << error;
  ASSERT_TRUE(Finish(&c, 2, &error)) << error;
  EXPECT_EQ(c.compute_at, ComputeAt::kBackward);
  EXPECT_TRUE(c.overlap_grad_reduce);
  Config bad;
  EXPECT_EQ(Parse({"--compute-at", "optimizer"}, &bad, &error), ParseResult::kError);
  ASSERT_EQ(Parse({"--overlap-grad-reduce", "--sharded-optimizer", "--optimizer", "momentum"}, &bad, &error),
            ParseResult::kOk) << error;
  EXPECT_FALSE(Finish(&bad, 2, &error));
  EXPECT_NE(error.find("--overlap-grad-reduce"), std::string::npos) << error;
  EXPECT_EQ(HelpText(true).find("--overlap-grad-reduce"), std::string::npos);
  EXPECT_NE(HelpText(false).find("--overlap-grad-reduce"), std::string::npos);
}

// Every rank in a host hang (peers waiting outside NCCL, like a TCPStore barrier), a clean exit.
TEST(TrainsimConfig, FaultOnEveryRankAndExit) {
  Config c;
  std::string error;
  ASSERT_EQ(Parse({"--fault", "hang-host", "--fault-rank", "all"}, &c, &error), ParseResult::kOk) << error;
  EXPECT_EQ(c.fault_rank, kAllRanks);
  EXPECT_TRUE(Finish(&c, 4, &error)) << error;
  ASSERT_EQ(Parse({"--fault", "exit", "--fault-rank", "2"}, &c, &error), ParseResult::kOk) << error;
  EXPECT_EQ(c.fault, FaultKind::kExit);
  EXPECT_STREQ(FaultName(c.fault), "exit");
  EXPECT_EQ(Parse({"--fault-rank", "-1"}, &c, &error), ParseResult::kError);
}

TEST(TrainsimConfig, SdcFaultAndFtModes) {
  Config c;
  std::string error;
  EXPECT_EQ(c.ft, FtMode::kRestore);  // with libft.so, restoring is the default
  ASSERT_EQ(Parse({"--fault", "sdc", "--fault-rank", "1", "--fault-step", "3", "--ft", "save"}, &c, &error),
            ParseResult::kOk)
      << error;
  EXPECT_EQ(c.fault, FaultKind::kSdc);
  EXPECT_STREQ(FaultName(c.fault), "sdc");
  EXPECT_EQ(c.fault_rank, 1);
  EXPECT_EQ(c.fault_step, 3);
  EXPECT_EQ(c.ft, FtMode::kSave);
  ASSERT_EQ(Parse({"--ft=off"}, &c, &error), ParseResult::kOk) << error;
  EXPECT_EQ(c.ft, FtMode::kOff);
  EXPECT_STREQ(FtModeName(c.ft), "off");
  EXPECT_EQ(Parse({"--ft", "maybe"}, &c, &error), ParseResult::kError);
  EXPECT_NE(error.find("bad value 'maybe' for --ft"), std::string::npos) << error;
  const std::string help = HelpText(false);
  EXPECT_NE(help.find("sdc"), std::string::npos);
  EXPECT_NE(help.find("restored step="), std::string::npos);
  EXPECT_EQ(HelpText(true).find("--ft "), std::string::npos);  // the reference ignores it
}

// The bit flip of --fault sdc: exactly one bit of the float changes, and the value stays an
// integer in [0, 256) one away from the original, so the corrupted replica keeps training
// exactly and stays different from its peers.
TEST(TrainsimFaults, FlipParameterBitFlipsOneBitWithinTheDomain) {
  int flips = 0;
  for (int v = 0; v < 256; ++v) {
    float flipped = -1;
    int bit = -1;
    const bool ok = FlipParameterBit(static_cast<float>(v), &flipped, &bit);
    if (v < 2) {
      EXPECT_FALSE(ok) << v;
      continue;
    }
    ASSERT_TRUE(ok) << v;
    ++flips;
    uint32_t a = 0, b = 0;
    const float fv = static_cast<float>(v);
    std::memcpy(&a, &fv, 4);
    std::memcpy(&b, &flipped, 4);
    EXPECT_EQ(__builtin_popcount(a ^ b), 1) << v;
    EXPECT_EQ(a ^ b, 1u << bit) << v;
    EXPECT_EQ(flipped, static_cast<float>(static_cast<int>(flipped))) << v;
    EXPECT_GE(flipped, 0.0f);
    EXPECT_LT(flipped, 256.0f);
    EXPECT_EQ(std::abs(flipped - fv), 1.0f) << v;
  }
  EXPECT_EQ(flips, 254);
  float out = 0;
  int bit = 0;
  EXPECT_FALSE(FlipParameterBit(2.5f, &out, &bit));
  EXPECT_FALSE(FlipParameterBit(300.0f, &out, &bit));
  EXPECT_FALSE(FlipParameterBit(-4.0f, &out, &bit));
}

TEST(TrainsimConfig, Finish) {
  std::string error;
  Config c;
  c.tp = 2;
  c.pp = 2;
  ASSERT_TRUE(Finish(&c, 8, &error)) << error;
  EXPECT_EQ(c.dp, 2);
  Config bad_world;
  bad_world.tp = 3;
  EXPECT_FALSE(Finish(&bad_world, 8, &error));
  Config bad_layers;
  bad_layers.pp = 3;
  bad_layers.layers = 4;
  EXPECT_FALSE(Finish(&bad_layers, 3, &error));
  Config bad_fault;
  bad_fault.fault = FaultKind::kPause;
  bad_fault.fault_rank = 4;
  EXPECT_FALSE(Finish(&bad_fault, 4, &error));
  Config tiny;
  tiny.param_bytes = 8;  // 4 layers need 16 bytes
  EXPECT_FALSE(Finish(&tiny, 1, &error));
}

// ---- The CPU kernel library, loaded the way gpusim loads it ----

struct Registered {
  gpusim_kernel_fn fn;
  std::vector<size_t> sizes;
};
std::map<std::string, Registered>* g_registry = nullptr;

void Record(const char* name, gpusim_kernel_fn fn, const size_t* sizes, int nargs) {
  (*g_registry)[name] = Registered{fn, std::vector<size_t>(sizes, sizes + nargs)};
}

class KernelLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(TRAINSIM_KERNELS_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto reg = reinterpret_cast<void (*)(gpusim_register_fn)>(dlsym(handle_, "gpusim_register_kernels"));
    ASSERT_NE(reg, nullptr);
    g_registry = &kernels_;
    reg(&Record);
    g_registry = nullptr;
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
  }
  void Run(const std::string& name, std::vector<void*> args) {
    ASSERT_TRUE(kernels_.count(name)) << name;
    ASSERT_EQ(kernels_[name].sizes.size(), args.size()) << name;
    gpusim_launch launch{{1, 1, 1}, {256, 1, 1}, 0, nullptr};
    kernels_[name].fn(&launch, args.data());
  }
  void* handle_ = nullptr;
  std::map<std::string, Registered> kernels_;
};

TEST_F(KernelLibrary, RegistersEveryKernelWithItsArgumentSizes) {
  const std::map<std::string, std::vector<size_t>> expected = {
      {"trainsim::fill", {8, 4, 8}},
      {"trainsim::init_params", {8, 8, 8, 8}},
      {"trainsim::load_batch", {8, 8, 8}},
      {"trainsim::forward_partial", {8, 8, 8, 8, 8, 8}},
      {"trainsim::forward_finish", {8, 8, 8, 8}},
      {"trainsim::loss_grad", {8, 8, 8, 8}},
      {"trainsim::backward_params", {8, 8, 8, 8, 8, 8}},
      {"trainsim::backward_input", {8, 8, 8, 8, 8, 8}},
      {"trainsim::backward_finish", {8, 8, 8, 8}},
      {"trainsim::scale", {8, 4, 8}},
      {"trainsim::optimizer_step", {8, 8, 4, 8}},
      {"trainsim::momentum_step", {8, 8, 8, 4, 8}},
      {"trainsim::count_steps", {8, 8}},
      {"trainsim::compute_spin", {8}},
      {"trainsim::hang_forever", {8}},
  };
  ASSERT_EQ(kernels_.size(), expected.size());
  for (const auto& [name, sizes] : expected) {
    ASSERT_TRUE(kernels_.count(name)) << name;
    EXPECT_EQ(kernels_[name].sizes, sizes) << name;
  }
}

TEST_F(KernelLibrary, BodiesComputeTheElementFunctions) {
  const int64_t hidden = 50, shard = 130, offset = 260;
  std::vector<float> w(shard), x(hidden), part(hidden), expect(hidden);
  for (int64_t i = 0; i < shard; ++i) w[i] = ByteValue(1, i);
  for (int64_t a = 0; a < hidden; ++a) x[a] = ByteValue(2, a);
  const float* wp = w.data();
  const float* xp = x.data();
  float* pp = part.data();
  int64_t off = offset, len = shard, n = hidden;
  Run("trainsim::forward_partial", {&wp, &xp, &pp, &off, &len, &n});
  for (int64_t a = 0; a < hidden; ++a) forward_partial_at(a, wp, xp, expect.data(), offset, shard, hidden);
  EXPECT_EQ(part, expect);

  std::vector<float> params(shard);
  float* p = params.data();
  uint64_t key = ParamKey(9, 3);
  int64_t count = shard;
  Run("trainsim::init_params", {&p, &key, &off, &count});
  for (int64_t i = 0; i < shard; ++i) ASSERT_EQ(params[i], ByteValue(key, offset + i));
}

TEST_F(KernelLibrary, CountStepsCountsOneUpdate) {
  int64_t counter = 41;
  int64_t* c = &counter;
  int64_t n = 1;
  Run("trainsim::count_steps", {&c, &n});
  EXPECT_EQ(counter, 42);
}

TEST_F(KernelLibrary, ComputeSpinTakesItsTime) {
  int64_t ns = 30'000'000;
  const auto t0 = std::chrono::steady_clock::now();
  Run("trainsim::compute_spin", {&ns});
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(30));
}

}  // namespace
}  // namespace trainsim

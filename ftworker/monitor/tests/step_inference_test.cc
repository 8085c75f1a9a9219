#include "ftworker/monitor/step_inference.h"

#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <random>

#include "shm/records.h"

namespace ft::worker {
namespace {

using shm::OpKind;

constexpr uint64_t kMs = 1'000'000;

struct OpSpec {
  uint64_t comm;
  OpKind op;
  uint64_t bytes;
  uint64_t gpu_ns;  // GPU duration
};

uint64_t Sig(const OpSpec& s) {
  return StepInference::Signature(s.comm, static_cast<uint32_t>(s.op), s.bytes < 65536 ? 0 : 2);
}

// A trainsim-like step: per micro-batch, forward: a tp allreduce per layer, then a pp send
// and recv; backward the same; after all micro-batches one dp allreduce.
std::vector<OpSpec> TrainsimStep(int microbatches, int layers) {
  const uint64_t tp = 0x1111, pp = 0x2222, dp = 0x3333;
  std::vector<OpSpec> ops;
  for (int m = 0; m < microbatches; ++m) {
    for (int l = 0; l < layers; ++l) ops.push_back({tp, OpKind::kAllReduce, 4096, kMs / 5});
    ops.push_back({pp, OpKind::kSend, 8192, kMs / 10});
    ops.push_back({pp, OpKind::kRecv, 8192, kMs / 10});
  }
  for (int m = 0; m < microbatches; ++m) {
    for (int l = 0; l < layers; ++l) ops.push_back({tp, OpKind::kAllReduce, 4096, kMs / 5});
    ops.push_back({pp, OpKind::kRecv, 8192, kMs / 10});
    ops.push_back({pp, OpKind::kSend, 8192, kMs / 10});
  }
  ops.push_back({dp, OpKind::kAllReduce, 64 << 20, 3 * kMs});
  return ops;
}

// Feeds `steps` steps of `cycle`, each `step_ns` long (times `jitter` drawn per step), ops
// spread evenly, each op on the GPU right after its enter. Returns the time after the last.
struct Feeder {
  StepInference* inf;
  std::mt19937_64 rng{42};
  uint64_t t = 1'000'000'000;
  uint64_t comm_ns_per_step = 0;  // what the GPU intervals add up to per step (no overlap)

  void Feed(const std::vector<OpSpec>& cycle, int steps, uint64_t step_ns, double jitter = 0,
            double insert_noise = 0, double drop = 0, bool report_gaps = true) {
    std::uniform_real_distribution<double> u(0, 1);
    for (int s = 0; s < steps; ++s) {
      double f = 1 + jitter * (2 * u(rng) - 1);
      uint64_t this_step = static_cast<uint64_t>(static_cast<double>(step_ns) * f);
      uint64_t slot = this_step / cycle.size();
      uint64_t comm = 0;
      for (size_t i = 0; i < cycle.size(); ++i) {
        uint64_t enter = t + i * slot;
        if (insert_noise > 0 && u(rng) < insert_noise) {
          inf->OnEnter(StepInference::Signature(0x9999, 4, 0), enter);  // a stray broadcast
        }
        if (drop > 0 && u(rng) < drop) {
          if (report_gaps) inf->OnGap();
          continue;
        }
        inf->OnEnter(Sig(cycle[i]), enter, cycle[i].bytes);
        uint64_t d = std::min(cycle[i].gpu_ns, slot / 2);
        inf->OnOpInterval(enter + slot / 4, enter + slot / 4 + d);
        comm += d;
        if (i % 16 == 15) inf->Flush();
      }
      comm_ns_per_step = comm;
      t += this_step;
      inf->Flush();
    }
  }
};

TEST(StepInference, TrainsimPatternLocksAndMeasuresSteps) {
  StepInference inf;
  Feeder feed{&inf};
  auto cycle = TrainsimStep(4, 4);  // 49 ops
  feed.Feed(cycle, 30, 100 * kMs);
  EXPECT_TRUE(inf.locked());
  EXPECT_EQ(inf.period(), cycle.size());
  auto steps = inf.TakeSteps();
  ASSERT_GE(steps.size(), 20u);
  for (const auto& s : steps) {
    EXPECT_NEAR(s.step_ms, 100.0, 0.01);
    EXPECT_NEAR(s.comm_ms, static_cast<double>(feed.comm_ns_per_step) / 1e6, 0.05);
    EXPECT_NEAR(s.compute_ms, s.step_ms - s.comm_ms, 1e-9);
    EXPECT_EQ(s.generation, 1u);
  }
  // The anchor is the op occurring once per step: the dp allreduce.
  EXPECT_EQ(steps[1].begin_ns, steps[0].end_ns);
}

TEST(StepInference, StepsCarryTheBytesTheirOpsEntered) {
  StepInference inf;
  Feeder feed{&inf};
  auto cycle = TrainsimStep(2, 3);
  uint64_t per_step = 0;
  for (const OpSpec& op : cycle) per_step += op.bytes;
  feed.Feed(cycle, 20, 50 * kMs, 0, 0.02);  // stray ops: resyncs, still whole steps after
  auto steps = inf.TakeSteps();
  ASSERT_GE(steps.size(), 10u);
  // The stray ops carry no bytes: every measured step, the first after the lock and those
  // after a resync included, holds exactly its cycle's.
  for (const auto& s : steps) EXPECT_EQ(s.bytes, per_step) << "step " << s.index;
}

TEST(StepInference, RunOfIdenticalOpsIsNotTakenForTheStep) {
  // 40 identical tp allreduces then one dp allreduce: period 41, not 1.
  std::vector<OpSpec> cycle(40, OpSpec{0x1, OpKind::kAllReduce, 1024, kMs / 10});
  cycle.push_back({0x2, OpKind::kAllReduce, 1 << 26, kMs});
  StepInference inf;
  Feeder feed{&inf};
  feed.Feed(cycle, 12, 50 * kMs);
  EXPECT_TRUE(inf.locked());
  EXPECT_EQ(inf.period(), 41u);
  auto steps = inf.TakeSteps();
  ASSERT_FALSE(steps.empty());
  EXPECT_NEAR(steps.back().step_ms, 50.0, 0.01);
}

TEST(StepInference, SingleOpStep) {
  StepInference inf;
  Feeder feed{&inf};
  feed.Feed({{0x5, OpKind::kAllReduce, 1 << 24, 2 * kMs}}, 60, 20 * kMs);
  EXPECT_TRUE(inf.locked());
  EXPECT_EQ(inf.period(), 1u);
  auto steps = inf.TakeSteps();
  ASSERT_GE(steps.size(), 20u);
  EXPECT_NEAR(steps.back().step_ms, 20.0, 0.01);
}

// DDP's overlap with equal buckets: every op of a step is the same all-reduce, so the op
// pattern repeats every op and inference takes one op for the step. The app's marks
// (ft_step_done) are the steps: whole, measured from mark to mark, a new generation.
TEST(StepInference, DeclaredStepsReplaceAPatternThatCannotTellTheStepsApart) {
  StepInference inf;
  const uint64_t sig = StepInference::Signature(0x7, static_cast<uint32_t>(OpKind::kAllReduce), 2);
  uint64_t t = 1'000'000'000;
  auto step = [&](uint64_t step_ns, bool mark) {
    // Four buckets launched in a burst at the end of the backward pass, on the GPU one after
    // the other over the step's last 20 ms; the mark when the host synchronized at the end.
    for (int b = 0; b < 4; ++b) {
      inf.OnEnter(sig, t + step_ns - 30 * kMs + static_cast<uint64_t>(b) * 1000, 1 << 20);
      const uint64_t begin = t + step_ns - 20 * kMs + static_cast<uint64_t>(b) * 5 * kMs;
      inf.OnOpInterval(begin, begin + 5 * kMs);
    }
    t += step_ns;
    if (mark) inf.OnDeclaredStep(t);
    inf.Flush();
  };
  for (int i = 0; i < 20; ++i) step(100 * kMs, false);
  EXPECT_EQ(inf.period(), 1u);  // what inference alone makes of it
  const auto inferred = inf.TakeSteps();
  ASSERT_FALSE(inferred.empty());
  EXPECT_LT(inferred.back().step_ms, 50.0);  // a step that is not one
  const uint64_t before = inf.generation();

  step(100 * kMs, true);  // the first mark: its step's ops were still taken by inference
  EXPECT_TRUE(inf.declared());
  for (const auto& s : inf.TakeSteps()) EXPECT_EQ(s.generation, before);
  for (int i = 0; i < 10; ++i) step(100 * kMs, true);
  const auto steps = inf.TakeSteps();
  ASSERT_GE(steps.size(), 9u);  // the first mark begins a step; the last step waits for the next mark
  for (const auto& s : steps) {
    EXPECT_NEAR(s.step_ms, 100.0, 0.01);
    EXPECT_NEAR(s.comm_ms, 20.0, 0.01);
    EXPECT_NEAR(s.compute_ms, 80.0, 0.01);
    EXPECT_EQ(s.bytes, 4u << 20);
    EXPECT_EQ(s.generation, before + 1);
  }
  // A gap may have lost a mark: the step it spans is not reported; the next ones are.
  inf.OnGap();
  step(300 * kMs, true);
  for (int i = 0; i < 4; ++i) step(100 * kMs, true);
  const auto after = inf.TakeSteps();
  EXPECT_GE(after.size(), 3u);
  for (const auto& s : after) EXPECT_NEAR(s.step_ms, 100.0, 0.01) << "step " << s.index;
}

TEST(StepInference, JitterDoesNotMatterNoiseAndDropsResync) {
  StepInference inf;
  Feeder feed{&inf};
  auto cycle = TrainsimStep(2, 3);
  feed.Feed(cycle, 20, 100 * kMs, 0.1);
  ASSERT_TRUE(inf.locked());
  (void)inf.TakeSteps();
  // Stray ops (about one per 2 steps) and lost records (some reported as gaps, some not).
  feed.Feed(cycle, 100, 100 * kMs, 0.1, 0.02, 0.0);
  feed.Feed(cycle, 100, 100 * kMs, 0.1, 0.0, 0.01, true);
  feed.Feed(cycle, 100, 100 * kMs, 0.1, 0.0, 0.01, false);
  feed.Feed(cycle, 5, 100 * kMs, 0.1);
  EXPECT_TRUE(inf.locked());
  EXPECT_EQ(inf.period(), cycle.size());
  EXPECT_EQ(inf.generation(), 1u) << "noise must not look like a new pattern";
  auto steps = inf.TakeSteps();
  EXPECT_GE(steps.size(), 150u) << "noise costs only the steps it touched";
  for (const auto& s : steps) {
    EXPECT_GE(s.step_ms, 89.9);
    EXPECT_LE(s.step_ms, 110.1) << "a step measured across lost ops: " << s.index;
  }
}

TEST(StepInference, PatternChangeGetsNewGeneration) {
  StepInference inf;
  Feeder feed{&inf};
  auto train = TrainsimStep(2, 2);
  std::vector<OpSpec> eval = {{0x1111, OpKind::kAllReduce, 4096, kMs / 5},
                              {0x1111, OpKind::kAllGather, 4096, kMs / 5},
                              {0x4444, OpKind::kAllReduce, 16, kMs / 5}};
  feed.Feed(train, 20, 100 * kMs);
  ASSERT_TRUE(inf.locked());
  EXPECT_EQ(inf.generation(), 1u);
  feed.Feed(eval, 60, 30 * kMs);
  EXPECT_TRUE(inf.locked());
  EXPECT_EQ(inf.period(), 3u);
  EXPECT_EQ(inf.generation(), 2u);
  auto steps = inf.TakeSteps();
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back().generation, 2u);
  EXPECT_NEAR(steps.back().step_ms, 30.0, 0.01);
  // Back to training: the same cycle as before keeps its generation number? No: a different
  // pattern than the last one is a new generation, whatever came before.
  feed.Feed(train, 20, 100 * kMs);
  EXPECT_TRUE(inf.locked());
  EXPECT_EQ(inf.period(), train.size());
  steps = inf.TakeSteps();
  ASSERT_FALSE(steps.empty());
  EXPECT_NEAR(steps.back().step_ms, 100.0, 0.01);
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(StepInference, LongPeriodWithinBound) {
  // 3000 ops per step: 100 layers x 30 distinct ops.
  std::vector<OpSpec> cycle;
  for (int l = 0; l < 100; ++l) {
    for (int k = 0; k < 30; ++k) cycle.push_back({0x100 + static_cast<uint64_t>(k % 7), OpKind::kAllReduce, k % 3 == 0 ? 1u << 20 : 100u, kMs / 100});
  }
  cycle.push_back({0x999, OpKind::kAllReduce, 1 << 26, kMs});
  StepInference inf;
  Feeder feed{&inf};
  // The bound is on this thread's CPU time, not the wall clock: it says the work is not
  // quadratic in the period, which a loaded machine's wall clock cannot tell.
  const double cpu_start = ThreadCpuSeconds();
  feed.Feed(cycle, 6, 1000 * kMs);
  const double took_s = ThreadCpuSeconds() - cpu_start;
  EXPECT_TRUE(inf.locked());
  EXPECT_EQ(inf.period(), cycle.size());
  EXPECT_LT(took_s, 1.5);
  auto steps = inf.TakeSteps();
  ASSERT_FALSE(steps.empty());
  EXPECT_NEAR(steps.back().step_ms, 1000.0, 0.01);
}

TEST(StepInference, ManyMicrobatchesAndLongRunsOfOneOp) {
  // 8 micro-batches (a micro-batch block repeats 8 times per pass) and a Megatron-like
  // 128 identical tp allreduces per step: neither part is taken for the step for good.
  auto pipeline = TrainsimStep(8, 4);  // 97 ops
  std::vector<OpSpec> megatron(128, OpSpec{0x7, OpKind::kAllReduce, 4096, kMs / 10});
  megatron.push_back({0x8, OpKind::kReduceScatter, 1 << 26, kMs});
  megatron.push_back({0x8, OpKind::kAllGather, 1 << 26, kMs});
  for (const auto* cycle : {&pipeline, &megatron}) {
    StepInference inf;
    Feeder feed{&inf};
    feed.Feed(*cycle, 10, 200 * kMs);
    EXPECT_TRUE(inf.locked());
    EXPECT_EQ(inf.period(), cycle->size());
    (void)inf.TakeSteps();
    feed.Feed(*cycle, 20, 200 * kMs);
    auto steps = inf.TakeSteps();
    EXPECT_EQ(steps.size(), 20u);
    for (const auto& s : steps) EXPECT_NEAR(s.step_ms, 200.0, 0.01);
  }
}

TEST(StepInference, RareExtraOpIsNoise) {
  // A barrier every 50 steps (beyond max_period ops away) is noise, not part of the step.
  auto cycle = TrainsimStep(4, 4);  // 49 ops: 50 steps = 2450 ops
  StepInferenceOptions options;
  options.max_period = 1024;
  StepInference inf(options);
  Feeder feed{&inf};
  uint64_t generation = 0;
  size_t steps = 0;
  for (int round = 0; round < 6; ++round) {
    if (round > 0) inf.OnEnter(StepInference::Signature(0x5555, 1, 0), feed.t);
    feed.Feed(cycle, 50, 100 * kMs);
    if (round == 0) generation = inf.generation();
    steps += inf.TakeSteps().size();
  }
  EXPECT_TRUE(inf.locked());
  EXPECT_EQ(inf.period(), cycle.size());
  EXPECT_EQ(inf.generation(), generation);
  EXPECT_GE(steps, 270u);
}

TEST(StepInference, NoPatternNoSteps) {
  StepInference inf;
  std::mt19937_64 rng(7);
  uint64_t t = 1;
  for (int i = 0; i < 20000; ++i) {
    inf.OnEnter(StepInference::Signature(rng() % 5, 1, 0), t += kMs);
    if (i % 10 == 0) inf.Flush();
  }
  EXPECT_FALSE(inf.locked());
  EXPECT_TRUE(inf.TakeSteps().empty());
}

TEST(StepInference, PeriodAboveTheBoundIsNotFound) {
  StepInferenceOptions options;
  options.max_period = 16;
  StepInference inf(options);
  Feeder feed{&inf};
  feed.Feed(TrainsimStep(2, 4), 10, 10 * kMs);  // 25 ops per step
  EXPECT_FALSE(inf.locked());
}

}  // namespace
}  // namespace ft::worker

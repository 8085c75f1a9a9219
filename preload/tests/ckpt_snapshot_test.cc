// Periodic snapshots that never block the host (docs/checkpoints.md, "Snapshots that never
// block"): FT_CKPT_EVERY=1, an app stream given to ft_update_begin, an "optimizer" queued on it
// right after. ckpt_slow_copy_shim.so (preloaded after libft.so) holds or delays the agent's
// device-to-host copies, so a missing order between the streams shows as wrong bytes.
// CTest preload.ckpt_snapshot (CkptSnapshot) and preload.ckpt_snapshot_blocking
// (CkptSnapshotBlocking: a fresh process that never calls ft_update_begin).
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "jitckpt/checksum.h"
#include "preload/tests/ckpt_test_util.h"

namespace ft::preload::ckpt_test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBytes = 16u << 20;  // 16 chunks of FT_CKPT_CHUNK=1mb

// ckpt_slow_copy_shim.so's knobs.
struct Shim {
  void (*hold)(int) = nullptr;
  void (*delay_us)(long) = nullptr;
  long (*held)() = nullptr;
};
const Shim& TheShim() {
  static Shim s = [] {
    Shim x;
    x.hold = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "gpusim_shim_hold_d2h"));
    x.delay_us = reinterpret_cast<void (*)(long)>(dlsym(RTLD_DEFAULT, "gpusim_shim_delay_d2h_us"));
    x.held = reinterpret_cast<long (*)()>(dlsym(RTLD_DEFAULT, "gpusim_shim_held_d2h"));
    return x;
  }();
  return s;
}
#define ASSERT_SHIM() \
  ASSERT_TRUE(TheShim().hold && TheShim().delay_us && TheShim().held) << "ckpt_slow_copy_shim.so is not preloaded"

// A host function that holds its stream until opened: the app's stream far behind its host
// (or hung).
struct Gate {
  std::atomic<bool> open{false};
  static void Fn(void* p) {
    auto* g = static_cast<Gate*>(p);
    while (!g->open.load()) std::this_thread::sleep_for(100us);
  }
};

struct App {
  void* param = nullptr;
  uint64_t* host_step = nullptr;  // host memory, registered: copied before ft_step_done returns
  cudaStream_t stream = nullptr;
};

App MakeApp() {
  App a;
  EXPECT_EQ(cudaMalloc(&a.param, kBytes), cudaSuccess);
  static uint64_t host_steps[4];  // static: registered memory must outlive the process's saves
  static int made = 0;
  a.host_step = &host_steps[made++ % 4];
  EXPECT_EQ(cudaStreamCreateWithFlags(&a.stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(ft_register("param", a.param, kBytes), FT_OK) << ft_last_error();
  EXPECT_EQ(ft_register("host.step", a.host_step, sizeof(uint64_t)), FT_OK) << ft_last_error();
  EXPECT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  return a;
}

App& TheApp() {
  static App a = [] {
    unlink(ArenaPath().c_str());
    return MakeApp();
  }();
  return a;
}

// Step s's optimizer: every byte of the parameters becomes s, on the app's stream, right after
// ft_update_begin; the host part writes the step counter.
void Optimizer(App& a, int64_t s) {
  ASSERT_EQ(ft_update_begin(a.stream), FT_OK) << ft_last_error();
  *a.host_step = static_cast<uint64_t>(s);
  ASSERT_EQ(cudaMemsetAsync(a.param, static_cast<int>(s & 0xff), kBytes, a.stream), cudaSuccess);
}

// ft_step_done on another thread: a step that blocks (on a held copy) fails the test instead
// of hanging it; the hold is let go then so the process can end.
int StepDoneOrRelease(int64_t step, bool* returned) {
  auto f = std::async(std::launch::async, [step] { return ft_step_done(step); });
  *returned = f.wait_for(20s) == std::future_status::ready;
  if (!*returned) TheShim().hold(0);
  return f.get();
}

std::unique_ptr<Committed> WaitCommitted(const std::string& path, int64_t step) {
  std::unique_ptr<Committed> c;
  test_util::WaitUntil([&] {
    c = std::make_unique<Committed>();
    c->status = ckpt::Arena::OpenForRead(path, &c->arena);
    if (c->status.ok()) c->status = c->arena.ReadCommitted(&c->manifest, &c->generation);
    return c->status.ok() && c->manifest.step >= step;
  });
  return c;
}

// How many bytes of `name` in the committed copy are not `value` (0: all are).
size_t Differing(const Committed& c, const std::string& name, uint8_t value) {
  const ckpt::BufferEntry* e = Entry(c.manifest, name);
  if (e == nullptr) return SIZE_MAX;
  size_t n = 0;
  for (uint64_t i = 0; i < e->bytes; ++i) n += c.data()[e->offset + i] != value;
  return n;
}

uint64_t SavedHostStep(const Committed& c) {
  const ckpt::BufferEntry* e = Entry(c.manifest, "host.step");
  uint64_t v = UINT64_MAX;
  if (e != nullptr) std::memcpy(&v, c.data() + e->offset, sizeof(v));
  return v;
}

void ExpectStep(const Committed& c, int64_t step) {
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  EXPECT_EQ(c.manifest.step, step);
  EXPECT_FALSE(c.manifest.torn);
  EXPECT_EQ(Differing(c, "param", static_cast<uint8_t>(step & 0xff)), 0u)
      << "the committed copy of step " << step << " is not that step's bytes";
  EXPECT_EQ(SavedHostStep(c), static_cast<uint64_t>(step));
  for (size_t i = 0; i < c.manifest.chunk_count(); ++i) EXPECT_TRUE(ckpt::ChunkVerifies(c.manifest, i, c.data()));
}

// Every step saved, the next step's optimizer queued at once: it must wait on the device for
// the copy (held by the shim), so each committed copy holds exactly its step's bytes.
TEST(CkptSnapshot, EveryStepSnapshotOrdersTheOptimizerBehindTheCopy) {
  ASSERT_SHIM();
  App& a = TheApp();
  Optimizer(a, 1);
  for (int64_t s = 1; s <= 4; ++s) {
    TheShim().hold(1);
    bool returned = false;
    ASSERT_EQ(StepDoneOrRelease(s, &returned), FT_OK) << ft_last_error();
    ASSERT_TRUE(returned) << "ft_step_done(" << s << ") waited for the copy";
    Optimizer(a, s + 1);
    // The copy reached the hold (it waited for step s's end on the app's stream, then began)...
    EXPECT_TRUE(test_util::WaitUntil([&] { return TheShim().held() > 0; })) << "the snapshot's copy never began";
    // ... and the optimizer of step s+1 is behind it: its stream does not drain.
    EXPECT_FALSE(test_util::WaitUntil([&] { return cudaStreamQuery(a.stream) == cudaSuccess; }, 200ms))
        << "step " << s + 1 << "'s optimizer ran while step " << s << " was being copied";
    TheShim().hold(0);
    auto c = WaitCommitted(ArenaPath(), s);
    ExpectStep(*c, s);
  }
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);
  std::vector<uint8_t> now = DeviceBytes(a.param, kBytes);
  EXPECT_EQ(now[0], 5);
  EXPECT_EQ(now[kBytes - 1], 5);
}

// ft_step_done returns while the app's stream has not even reached the step's end (held by a
// gate): the copy cannot have run, and when it runs it holds what the app queued before.
TEST(CkptSnapshot, StepDoneReturnsBeforeTheCopyCanBegin) {
  App& a = TheApp();
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);
  static Gate gate;  // a host function may read it after an early return
  gate.open.store(false);
  ASSERT_EQ(ft_update_begin(a.stream), FT_OK);
  ASSERT_EQ(cudaLaunchHostFunc(a.stream, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.param, 10, kBytes, a.stream), cudaSuccess);  // step 10's update
  *a.host_step = 10;
  auto f = std::async(std::launch::async, [] { return ft_step_done(10); });
  const bool returned = f.wait_for(20s) == std::future_status::ready;
  const bool gate_was_closed = !gate.open.load();
  auto before = ReadArena();
  gate.open.store(true);
  ASSERT_TRUE(returned) << "ft_step_done waited for the app's stream";
  ASSERT_EQ(f.get(), FT_OK) << ft_last_error();
  EXPECT_TRUE(gate_was_closed);
  EXPECT_TRUE(!before->status.ok() || before->manifest.step < 10) << "committed before the copy could run";
  Optimizer(a, 11);
  auto c = WaitCommitted(ArenaPath(), 10);
  ExpectStep(*c, 10);
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);  // the gate's host function is done
}

// A just-in-time save asked while the snapshot waits for an app stream that does not get
// there (a peer hangs) cannot run before it; it is answered within about a second, not never.
TEST(CkptSnapshot, SaveCommandWhileTheSnapshotWaitsForAStuckStreamIsAnswered) {
  App& a = TheApp();
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);
  static Gate gate;  // a host function may read it after an early return
  gate.open.store(false);
  ASSERT_EQ(ft_update_begin(a.stream), FT_OK);
  ASSERT_EQ(cudaLaunchHostFunc(a.stream, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a.param, 20, kBytes, a.stream), cudaSuccess);
  *a.host_step = 20;
  ASSERT_EQ(ft_step_done(20), FT_OK) << ft_last_error();
  uint64_t seq = Post(shm::CommandType::kSave, "jit-while-stuck");
  auto ack = WaitAck(seq);
  gate.open.store(true);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->result, static_cast<int32_t>(StatusCode::kUnavailable)) << ack->message;
  EXPECT_NE(ack->message.find("waits for the app's stream"), std::string::npos) << ack->message;
  EXPECT_NE(ack->message.find("committed copy kept"), std::string::npos) << "cut short: " << ack->message;
  Optimizer(a, 21);
  auto c = WaitCommitted(ArenaPath(), 20);
  ExpectStep(*c, 20);
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);  // the gate's host function is done
}

// A kSaveAtStep (`ftmaster save`) that arrives while a snapshot runs is not lost to a skipped
// step: the next snapshot taken serves it.
TEST(CkptSnapshot, SaveAtStepWaitsThroughASkippedStep) {
  ASSERT_SHIM();
  App& a = TheApp();
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);
  Optimizer(a, 30);
  TheShim().hold(1);
  bool returned = false;
  ASSERT_EQ(StepDoneOrRelease(30, &returned), FT_OK) << ft_last_error();
  ASSERT_TRUE(returned);
  uint64_t seq = Post(shm::CommandType::kSaveAtStep, "at-step-while-running");
  // The poller took it: a few of its rounds (each advances the heartbeat) went by.
  uint64_t rounds = Own().header()->heartbeat_count.load() + 5;
  ASSERT_TRUE(test_util::WaitUntil([&] { return Own().header()->heartbeat_count.load() >= rounds; }));
  Optimizer(a, 31);
  ASSERT_EQ(StepDoneOrRelease(31, &returned), FT_OK) << ft_last_error();  // skipped: 30 still copies
  ASSERT_TRUE(returned);
  TheShim().hold(0);
  auto c = WaitCommitted(ArenaPath(), 30);
  ExpectStep(*c, 30);
  EXPECT_FALSE(shm::PollAck(Own(), seq).has_value()) << "served by a snapshot that began before it came";
  Optimizer(a, 32);
  ASSERT_TRUE(test_util::WaitUntil([&] {
    std::unique_ptr<Committed> now = ReadArena();
    return now->status.ok() && now->manifest.step == 30;
  }));
  ASSERT_EQ(ft_step_done(32), FT_OK) << ft_last_error();
  auto ack = WaitAck(seq);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->result, 0) << ack->message;
  EXPECT_TRUE(StartsWith(ack->message, "saved step=32 ")) << ack->message;
  ExpectStep(*WaitCommitted(ArenaPath(), 32), 32);
}

// An app that stops calling ft_update_begin after a snapshot began: its next update is not
// ordered behind the copy, which is then marked torn (never restored), not trusted.
TEST(CkptSnapshot, AnUpdateNotOrderedBehindTheCopyMakesItTorn) {
  ASSERT_SHIM();
  App& a = TheApp();
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);
  Optimizer(a, 40);
  TheShim().hold(1);
  bool returned = false;
  ASSERT_EQ(StepDoneOrRelease(40, &returned), FT_OK) << ft_last_error();
  ASSERT_TRUE(returned);
  // Step 41's update without ft_update_begin, while step 40 is being copied.
  ASSERT_EQ(cudaMemsetAsync(a.param, 41, kBytes, a.stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);
  ASSERT_EQ(StepDoneOrRelease(41, &returned), FT_OK) << ft_last_error();
  TheShim().hold(0);
  // The copy of step 40 lands in the arena's free slot, torn; the whole copy before it stays the
  // committed one (a torn copy never hides it).
  Committed in_slot;
  ASSERT_TRUE(ckpt::Arena::OpenForRead(ArenaPath(), &in_slot.arena).ok());
  test_util::WaitUntil([&] {
    for (int slot = 0; slot < in_slot.arena.slot_count(); ++slot) {
      in_slot.status = in_slot.arena.ReadSlot(slot, &in_slot.manifest, &in_slot.generation);
      if (in_slot.status.ok() && in_slot.manifest.step == 40) return true;
    }
    return false;
  });
  ASSERT_EQ(in_slot.manifest.step, 40) << in_slot.status.ToString();
  EXPECT_TRUE(in_slot.manifest.torn) << "an unordered update during the copy went unnoticed";
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok()) << c->status.ToString();
  EXPECT_FALSE(c->manifest.torn) << "the torn copy of step 40 became the committed copy";
  EXPECT_LT(c->manifest.step, 40);
}

std::string ChildJob() { return Job() + "-skip"; }

// A due step while the previous snapshot still runs is skipped, not waited for: the child's
// step 2 comes while step 1's copy is held; it exits after letting the copy go (the exit waits
// for the running snapshot). A finish-the-newer rule would block step 2 and commit it.
TEST(CkptSnapshot, DueStepWhileThePreviousSnapshotRunsIsSkipped) {
  ASSERT_SHIM();
  const std::string path = ckpt::Arena::PathFor(ArenaDir(), ChildJob(), Rank());
  unlink(path.c_str());
  ASSERT_EQ(RunSelf("CkptSnapshotChild.StepTwoWhileStepOneIsHeld", {"FT_JOB=" + ChildJob()}), 0);
  auto c = std::make_unique<Committed>();
  c->status = ckpt::Arena::OpenForRead(path, &c->arena);
  if (c->status.ok()) c->status = c->arena.ReadCommitted(&c->manifest, &c->generation);
  ExpectStep(*c, 1);
  unlink(path.c_str());
}

TEST(CkptSnapshotChild, StepTwoWhileStepOneIsHeld) {
  if (Env("FT_TEST_CKPT_CHILD").empty()) GTEST_SKIP() << "run by CkptSnapshot";
  App a = MakeApp();
  Optimizer(a, 1);
  TheShim().hold(1);
  bool returned = false;
  if (StepDoneOrRelease(1, &returned) != FT_OK || !returned) _exit(2);
  Optimizer(a, 2);
  if (!test_util::WaitUntil([&] { return TheShim().held() > 0; })) _exit(3);
  if (StepDoneOrRelease(2, &returned) != FT_OK) _exit(4);
  if (!returned) _exit(5);  // waited for step 1's snapshot (the hold was let go after 20 s)
  TheShim().hold(0);
  exit(0);
}

// A program that never calls ft_update_begin: nothing orders its next update behind the copy,
// so ft_step_done returns only once the copy is complete (slowed down by the shim here).
TEST(CkptSnapshotBlocking, WithoutUpdateBeginStepDoneWaitsForTheCopy) {
  ASSERT_SHIM();
  unlink(ArenaPath().c_str());
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, kBytes), cudaSuccess);
  ASSERT_EQ(ft_register("param", dev, kBytes), FT_OK);
  ASSERT_EQ(ft_register_end(), FT_OK);
  FillDevice(dev, kBytes, 5);
  std::vector<uint8_t> step1 = DeviceBytes(dev, kBytes);
  TheShim().delay_us(20000);  // 20 ms before each chunk's copy
  ASSERT_EQ(ft_step_done(1), FT_OK) << ft_last_error();
  TheShim().delay_us(0);
  FillDevice(dev, kBytes, 6);  // the next update, at once
  auto c = WaitCommitted(ArenaPath(), 1);
  ASSERT_TRUE(c->status.ok()) << c->status.ToString();
  const ckpt::BufferEntry* e = Entry(c->manifest, "param");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(std::memcmp(c->data() + e->offset, step1.data(), kBytes) == 0) << "the copy ran after ft_step_done returned";
}

// FT_CKPT_ASYNC=0: the same with a stream given to ft_update_begin.
TEST(CkptSnapshotBlocking, AsyncOffStepDoneWaitsForTheCopy) {
  ASSERT_SHIM();
  const std::string job = Job() + "-async-off";
  const std::string path = ckpt::Arena::PathFor(ArenaDir(), job, Rank());
  unlink(path.c_str());
  ASSERT_EQ(RunSelf("CkptSnapshotBlockingChild.*", {"FT_JOB=" + job, "FT_CKPT_ASYNC=0"}), 0);
  unlink(path.c_str());
}

TEST(CkptSnapshotBlockingChild, AsyncOffStepDoneWaitsForTheCopy) {
  if (Env("FT_TEST_CKPT_CHILD").empty()) GTEST_SKIP() << "run by CkptSnapshotBlocking";
  App a = MakeApp();
  Optimizer(a, 1);
  ASSERT_EQ(cudaStreamSynchronize(a.stream), cudaSuccess);
  TheShim().delay_us(20000);
  ASSERT_EQ(ft_step_done(1), FT_OK) << ft_last_error();
  TheShim().delay_us(0);
  Optimizer(a, 2);
  auto c = WaitCommitted(ArenaPath(), 1);
  ExpectStep(*c, 1);
}

}  // namespace
}  // namespace ft::preload::ckpt_test

// ft_restore, in one process (CTest preload.ckpt_restore, FT_CKPT_EVERY=3: ft_step_done(3)
// saves the step restored); the restarted rank, the mismatching layout and the missing plan
// are children of it (this binary run again: same job and rank, so the same arena).
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <string>
#include <vector>

#include "jitckpt/checksum.h"
#include "jitckpt/node_plan.h"
#include "preload/tests/ckpt_test_util.h"

namespace ft::preload::ckpt_test {
namespace {

constexpr size_t kParamBytes = (6u << 20) + 4096;
constexpr size_t kStateBytes = 1u << 20;

struct State {
  void* param = nullptr;
  void* state = nullptr;
};

// Registers two device buffers (other names in the mismatch child).
State Register(const char* param_name, const char* state_name) {
  State s;
  EXPECT_EQ(cudaMalloc(&s.param, kParamBytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&s.state, kStateBytes), cudaSuccess);
  EXPECT_EQ(ft_register(param_name, s.param, kParamBytes), FT_OK) << ft_last_error();
  EXPECT_EQ(ft_register(state_name, s.state, kStateBytes), FT_OK) << ft_last_error();
  EXPECT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  return s;
}

State& Parent() {
  static State s = [] {
    unlink(ArenaPath().c_str());
    unlink(ckpt::NodePlanPath(ArenaDir(), Job(), Env("FT_NODE_ID")).c_str());
    State r = Register("param", "state");
    FillDevice(r.param, kParamBytes, 1);
    FillDevice(r.state, kStateBytes, 2);
    EXPECT_EQ(ft_step_done(3), FT_OK) << ft_last_error();
    std::unique_ptr<Committed> c;
    EXPECT_TRUE(test_util::WaitUntil([&] {
      c = ReadArena();
      return c->status.ok() && c->manifest.step == 3;
    }));
    return r;
  }();
  return s;
}

std::vector<uint8_t> Saved(const Committed& c, const std::string& name) {
  const ckpt::BufferEntry* e = Entry(c.manifest, name);
  if (e == nullptr) return {};
  return std::vector<uint8_t>(c.data() + e->offset, c.data() + e->offset + e->bytes);
}

TEST(CkptRestore, RestoreBringsTheSavedStepBackToTheDevice) {
  State& s = Parent();
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  ASSERT_EQ(c->manifest.step, 3);
  std::vector<uint8_t> param = Saved(*c, "param"), state = Saved(*c, "state");
  WritePlan(3, ckpt::ContentDigest(c->manifest));
  FillDevice(s.param, kParamBytes, 5);
  FillDevice(s.state, kStateBytes, 6);
  ASSERT_NE(DeviceBytes(s.param, kParamBytes), param);
  int64_t step = -1;
  ASSERT_EQ(ft_restore(&step), FT_OK) << ft_last_error();
  EXPECT_EQ(step, 3);
  EXPECT_TRUE(DeviceBytes(s.param, kParamBytes) == param);
  EXPECT_TRUE(DeviceBytes(s.state, kStateBytes) == state);
}

// Work the app queued before ft_restore (a memset behind a slow op on the legacy stream,
// as initialisation code leaves it) completes before the restored bytes are written, never
// on top of them: the agent's own stream is non-blocking, so nothing else orders the two.
TEST(CkptRestore, RestoreLandsAfterTheAppsQueuedWork) {
  State& s = Parent();
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  std::vector<uint8_t> param = Saved(*c, "param");
  WritePlan(3, ckpt::ContentDigest(c->manifest));
  auto slow = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); };
  ASSERT_EQ(cudaLaunchHostFunc(nullptr, slow, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(s.param, 0x77, kParamBytes, nullptr), cudaSuccess);
  int64_t step = -1;
  ASSERT_EQ(ft_restore(&step), FT_OK) << ft_last_error();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the memset has landed, wherever it went
  EXPECT_TRUE(DeviceBytes(s.param, kParamBytes) == param);
}

// A restarted rank (a new process, same job and rank) finds the copy in its arena.
TEST(CkptRestore, RestartedRankRestoresFromItsArena) {
  Parent();
  EXPECT_EQ(RunSelf("CkptChild.RestoresStep3", {}), 0);
}

TEST(CkptRestore, LayoutThatDiffersIsRefusedAndNothingRestored) {
  Parent();
  EXPECT_EQ(RunSelf("CkptChild.LayoutMismatch", {}), 0);
}

TEST(CkptRestore, NoPlanInTimeIsATimeoutAndAPlanWithoutStepIsNoCheckpoint) {
  Parent();
  EXPECT_EQ(RunSelf("CkptChild.NoPlan", {"FT_NODE_ID=node-without-worker", "FT_RESTORE_WAIT=300ms"}), 0);
  WritePlan(-1, 0);
  EXPECT_EQ(RunSelf("CkptChild.PlanWithoutStep", {}), 0);
}

// A worker that runs (it holds the node's plan lock) but has not written the plan: it had not
// read Redis yet (a shard failing over held one for 2.4 s in CI). Past FT_RESTORE_WAIT the
// error says so, not "is ftworker running?".
TEST(CkptRestore, NoPlanFromARunningWorkerSaysItWaitsForRedis) {
  Parent();
  const std::string node = "node-whose-worker-has-not-read-redis";
  const std::string plan = ckpt::NodePlanPath(ArenaDir(), Job(), node);
  ckpt::PlanWriterLock lock;
  ASSERT_TRUE(lock.Claim(plan).ok());
  EXPECT_EQ(RunSelf("CkptChild.NoPlanFromARunningWorker", {"FT_NODE_ID=" + node, "FT_RESTORE_WAIT=300ms"}), 0);
  lock.Release();
}

// A settling plan (the master has not judged a crash's copies yet) is never read as `step none`:
// ft_restore waits for the final plan, and past FT_RESTORE_WAIT fails saying what it waited for.
TEST(CkptRestore, ASettlingPlanIsWaitedThroughNeverReadAsStepNone) {
  Parent();
  WritePlan(-1, 0, "rank 0 of this node ended (signal 9)");
  EXPECT_EQ(RunSelf("CkptChild.SettlingPlanTimesOut", {"FT_RESTORE_WAIT=300ms"}), 0);
  WritePlan(-1, 0, "rank 0 of this node ended (signal 9)");
  EXPECT_EQ(RunSelf("CkptChild.WaitsThroughASettlingPlan", {}), 0);
}

// A save command that arrives while ft_restore waits for its plan waits for the restore: run
// first, it would copy the state not yet restored over the copy the restore is about to load.
TEST(CkptRestore, SaveCommandDuringARestoreWaitsForIt) {
  Parent();
  EXPECT_EQ(RunSelf("CkptChild.SaveWaitsForTheRestore", {"FT_NODE_ID=late-plan-node"}), 0);
}

// A save command between registration and ft_restore (the app loads data, builds its model:
// minutes) is refused: it would commit the freshly initialised state as a step over the copy
// the restore needs. The arena keeps step 3, byte for byte.
TEST(CkptRestore, SaveBeforeTheRestoreOrAStepIsRefusedAndTheArenaKeepsItsCopy) {
  Parent();
  EXPECT_EQ(RunSelf("CkptChild.SaveBeforeRestore", {}), 0);
}

// Last: it damages the arena's copy (and mends it after). A chunk that does not verify is
// never copied to the device; with no other source, nothing is restored.
TEST(CkptRestore, CopyThatDoesNotVerifyIsRefusedAndNothingRestored) {
  State& s = Parent();
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  WritePlan(c->manifest.step, ckpt::ContentDigest(c->manifest));
  // The slots end the file: one byte of the committed copy's first buffer, flipped in the file.
  off_t at = static_cast<off_t>(c->arena.mapped_bytes() - c->arena.slots_bytes() +
                                static_cast<uint64_t>(c->data() - c->arena.slots_data()) + 100);
  int fd = open(ArenaPath().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t byte = 0;
  ASSERT_EQ(pread(fd, &byte, 1, at), 1);
  ASSERT_EQ(byte, c->data()[100]) << "the data region is where this test thinks";
  uint8_t flipped = byte ^ 0x10;
  ASSERT_EQ(pwrite(fd, &flipped, 1, at), 1);
  FillDevice(s.param, kParamBytes, 11);
  std::vector<uint8_t> before = DeviceBytes(s.param, kParamBytes);
  int64_t step = -1;
  EXPECT_EQ(ft_restore(&step), FT_CORRUPT) << ft_last_error();
  EXPECT_EQ(step, -1);
  EXPECT_TRUE(DeviceBytes(s.param, kParamBytes) == before) << "nothing restored";
  ASSERT_EQ(pwrite(fd, &byte, 1, at), 1);
  close(fd);
}

// ---- children: run by RunSelf only (FT_TEST_CKPT_CHILD=1) ----

bool IsChild() { return !Env("FT_TEST_CKPT_CHILD").empty(); }

TEST(CkptChild, RestoresStep3) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore.RestartedRankRestoresFromItsArena";
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  std::vector<uint8_t> param = Saved(*c, "param");
  State s = Register("param", "state");
  int64_t step = -1;
  ASSERT_EQ(ft_restore(&step), FT_OK) << ft_last_error();
  EXPECT_EQ(step, 3);
  EXPECT_TRUE(DeviceBytes(s.param, kParamBytes) == param);
}

TEST(CkptChild, LayoutMismatch) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore.LayoutThatDiffersIsRefusedAndNothingRestored";
  // Same sizes and name lengths (the arena keeps its copy), another name.
  State s = Register("param", "optim");
  FillDevice(s.param, kParamBytes, 7);
  FillDevice(s.state, kStateBytes, 8);
  std::vector<uint8_t> param = DeviceBytes(s.param, kParamBytes);
  std::vector<uint8_t> state = DeviceBytes(s.state, kStateBytes);
  int64_t step = -1;
  EXPECT_EQ(ft_restore(&step), FT_LAYOUT_MISMATCH) << ft_last_error();
  std::string why = ft_last_error();
  EXPECT_NE(why.find("optim"), std::string::npos) << why;
  EXPECT_EQ(step, -1);
  EXPECT_TRUE(DeviceBytes(s.param, kParamBytes) == param) << "nothing restored";
  EXPECT_TRUE(DeviceBytes(s.state, kStateBytes) == state) << "nothing restored";
}

TEST(CkptChild, SaveWaitsForTheRestore) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore.SaveCommandDuringARestoreWaitsForIt";
  unlink(ckpt::NodePlanPath(ArenaDir(), Job(), Env("FT_NODE_ID")).c_str());  // an earlier run's
  State s = Register("param", "state");
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  ASSERT_EQ(c->manifest.step, 3);
  std::vector<uint8_t> param = Saved(*c, "param");
  FillDevice(s.param, kParamBytes, 13);
  std::atomic<bool> restoring{false};
  uint64_t seq = 0;
  bool acked_early = true;
  std::thread worker([&] {
    // The part of ftworker: a save command, then (later) the plan. ft_restore has no
    // observable "waiting" state: the margin lets it reach its wait for the plan.
    while (!restoring.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    seq = Post(shm::CommandType::kSave, "save-during-restore");
    uint64_t rounds = Own().header()->heartbeat_count.load() + 5;
    test_util::WaitUntil([&] { return Own().header()->heartbeat_count.load() >= rounds; });
    acked_early = shm::PollAck(Own(), seq).has_value();
    WritePlan(3, ckpt::ContentDigest(c->manifest));
  });
  restoring.store(true);
  int64_t step = -1;
  int r = ft_restore(&step);
  worker.join();
  EXPECT_EQ(r, FT_OK) << ft_last_error();
  EXPECT_FALSE(acked_early) << "the save ran before the restore";
  EXPECT_EQ(step, 3);
  EXPECT_TRUE(DeviceBytes(s.param, kParamBytes) == param);
  auto ack = WaitAck(seq);
  ASSERT_TRUE(ack);
  EXPECT_TRUE(StartsWith(ack->message, "saved step=3 ")) << "labelled with the restored step: "
                                                          << ack->message;
}

TEST(CkptChild, SaveBeforeRestore) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore.SaveBeforeTheRestoreOrAStepIsRefusedAndTheArenaKeepsItsCopy";
  auto before = ReadArena();
  ASSERT_TRUE(before->status.ok());
  ASSERT_EQ(before->manifest.step, 3);
  const std::vector<uint8_t> param = Saved(*before, "param");
  State s = Register("param", "state");
  FillDevice(s.param, kParamBytes, 21);  // the app's fresh initialisation
  auto ack = WaitAck(Post(shm::CommandType::kSave, "save-before-restore"));
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->result, static_cast<int32_t>(StatusCode::kUnavailable)) << ack->message;
  EXPECT_NE(ack->message.find("nothing to save"), std::string::npos) << ack->message;
  auto after = ReadArena();
  ASSERT_TRUE(after->status.ok()) << after->status.ToString();
  EXPECT_EQ(after->manifest.step, 3);
  EXPECT_EQ(ckpt::ContentDigest(after->manifest), ckpt::ContentDigest(before->manifest));
  EXPECT_TRUE(Saved(*after, "param") == param);
}

TEST(CkptChild, NoPlan) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore";
  Register("param", "state");
  int64_t step = -1;
  EXPECT_EQ(ft_restore(&step), FT_TIMEOUT);
  EXPECT_NE(std::string(ft_last_error()).find("is ftworker running"), std::string::npos) << ft_last_error();
}

TEST(CkptChild, NoPlanFromARunningWorker) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore.NoPlanFromARunningWorkerSaysItWaitsForRedis";
  Register("param", "state");
  int64_t step = -1;
  EXPECT_EQ(ft_restore(&step), FT_TIMEOUT);
  const std::string error = ft_last_error();
  EXPECT_NE(error.find("ftworker runs on this node"), std::string::npos) << error;
  EXPECT_NE(error.find("Redis"), std::string::npos) << error;
  EXPECT_EQ(error.find("is ftworker running"), std::string::npos) << error;
}

TEST(CkptChild, SettlingPlanTimesOut) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore.ASettlingPlanIsWaitedThroughNeverReadAsStepNone";
  Register("param", "state");
  int64_t step = -1;
  EXPECT_EQ(ft_restore(&step), FT_TIMEOUT);
  EXPECT_NE(std::string(ft_last_error()).find("still settling"), std::string::npos) << ft_last_error();
  EXPECT_NE(std::string(ft_last_error()).find("rank 0 of this node ended (signal 9)"), std::string::npos)
      << ft_last_error();
}

TEST(CkptChild, WaitsThroughASettlingPlan) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore.ASettlingPlanIsWaitedThroughNeverReadAsStepNone";
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  const uint64_t digest = ckpt::ContentDigest(c->manifest);
  Register("param", "state");
  // The master's final plan comes later than the rank: ft_restore must not have returned.
  std::atomic<bool> returned{false};
  std::thread master([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(returned.load()) << "ft_restore returned while the plan was settling";
    WritePlan(3, digest);
  });
  int64_t step = -1;
  const int r = ft_restore(&step);
  returned = true;
  master.join();
  EXPECT_EQ(r, FT_OK) << ft_last_error();
  EXPECT_EQ(step, 3);
}

TEST(CkptChild, PlanWithoutStep) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore";
  Register("param", "state");
  int64_t step = -1;
  EXPECT_EQ(ft_restore(&step), FT_NO_CHECKPOINT) << ft_last_error();
  EXPECT_EQ(step, -1);
}

}  // namespace
}  // namespace ft::preload::ckpt_test

// The host arena is prepared off the app's start-up path: ft_register_end returns once the
// arena file is made and mapped, and the agent thread reserves its data regions, maps their
// pages and pins them afterwards (ckpt_agent_thread.cc, PrepareArena). ckpt_slow_copy_shim.so,
// preloaded after libft.so, holds cudaHostRegister for as long as a test says, as pinning tens of
// GiB keeps a real runtime busy for seconds. What must hold meanwhile: ft_register_end returns,
// and every save asked for (a due snapshot, a just-in-time save, a failing exit's) waits for the
// preparation and is whole. CTest preload.ckpt_prepare (FT_CKPT_EVERY=1; children with 0).
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/node_plan.h"
#include "preload/tests/ckpt_test_util.h"

namespace ft::preload::ckpt_test {
namespace {

using namespace std::chrono_literals;

constexpr size_t kBytes = 24u << 20;  // 24 chunks of FT_CKPT_CHUNK=1mb

// ckpt_slow_copy_shim.so's knobs for cudaHostRegister.
struct PinHold {
  void (*hold)(int) = nullptr;
  long (*held)() = nullptr;
};
const PinHold& ThePinHold() {
  static PinHold h = [] {
    PinHold x;
    x.hold = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "gpusim_shim_hold_host_register"));
    x.held = reinterpret_cast<long (*)()>(dlsym(RTLD_DEFAULT, "gpusim_shim_held_host_register"));
    return x;
  }();
  return h;
}

bool IsChild() { return !Env("FT_TEST_CKPT_CHILD").empty(); }

// The arena's committed copy once it holds `step`.
std::unique_ptr<Committed> CommittedStep(int64_t step) {
  std::unique_ptr<Committed> c;
  const bool committed = test_util::WaitUntil([&] {
    c = ReadArena();
    return c->status.ok() && c->manifest.step == step;
  });
  EXPECT_TRUE(committed) << "step " << step << " was never committed: " << c->status.ToString() << ", step "
                         << c->manifest.step;
  return c;
}

// The copy is not torn, every chunk verifies, and it holds the device buffer's bytes.
void ExpectWhole(const Committed& c, const void* dev) {
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  EXPECT_FALSE(c.manifest.torn);
  for (size_t i = 0; i < c.manifest.chunk_count(); ++i) ASSERT_TRUE(ckpt::ChunkVerifies(c.manifest, i, c.data())) << i;
  const ckpt::BufferEntry* w = Entry(c.manifest, "model.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(DeviceBytes(dev, kBytes) == std::vector<uint8_t>(c.data() + w->offset, c.data() + w->offset + kBytes));
}

// libft.so's log (stderr, info by default) captured in a file from now on, to read the order of
// its lines; the file goes with it.
class LogFile {
 public:
  LogFile() : path_("/tmp/ft-ckpt-prepare-test." + std::to_string(getpid()) + ".log") {
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    redirected_ = fd >= 0 && dup2(fd, 2) == 2;
    if (fd >= 0) close(fd);
  }
  ~LogFile() { unlink(path_.c_str()); }
  bool redirected() const { return redirected_; }
  std::string Text() const {
    std::ifstream in(path_);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Until `line` appears; *text: the log then (or at the deadline).
  bool WaitFor(const char* line, std::string* text) const {
    return test_util::WaitUntil([&] {
      *text = Text();
      return text->find(line) != std::string::npos;
    });
  }

 private:
  std::string path_;
  bool redirected_ = false;
};

// The device buffer, registered with the arena's pinning held: ft_register_end must come back
// while the agent thread waits in cudaHostRegister (a registration that pinned inline would
// never return, and CTest's timeout would fail the test).
void* RegisterWithThePinHeld() {
  void* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, kBytes), cudaSuccess);
  FillDevice(dev, kBytes, 7);
  ThePinHold().hold(1);
  EXPECT_EQ(ft_register("model.weight", dev, kBytes), FT_OK) << ft_last_error();
  EXPECT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  return dev;
}

// Every step a snapshot (FT_CKPT_EVERY=1): the first due one waits for the preparation, so the
// step asked for is saved, and whole.
TEST(CkptPrepare, RegistrationReturnsFirstAndADueSnapshotWaitsForThePreparation) {
  if (IsChild()) GTEST_SKIP() << "the parent's test";
  ASSERT_TRUE(ThePinHold().hold && ThePinHold().held) << "ckpt_slow_copy_shim.so is not preloaded";
  unlink(ArenaPath().c_str());
  void* dev = RegisterWithThePinHeld();
  // The agent thread reserved and mapped the arena and now pins it.
  ASSERT_TRUE(test_util::WaitUntil([] { return ThePinHold().held() == 1; })) << "the agent never began pinning";

  std::atomic<int> result{-1};
  std::thread step([&] { result = ft_step_done(1); });
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(result.load(), -1) << "ft_step_done took its snapshot before the arena was prepared";
  EXPECT_EQ(ReadArena()->status.code(), StatusCode::kNotFound) << "a copy was committed before the arena was prepared";
  ThePinHold().hold(0);
  step.join();
  ASSERT_EQ(result.load(), FT_OK) << ft_last_error();
  // ft_step_done returns once the copy ended; the commit follows on the agent thread.
  ExpectWhole(*CommittedStep(1), dev);

  // Prepared: the next snapshot is taken as always.
  FillDevice(dev, kBytes, 8);
  ASSERT_EQ(ft_step_done(2), FT_OK) << ft_last_error();
  ExpectWhole(*CommittedStep(2), dev);
}

// No periodic saves (FT_CKPT_EVERY=0): a just-in-time save asked for while the arena is being
// pinned waits for it, then copies the whole step.
TEST(CkptPrepare, AJustInTimeSaveWaitsForThePreparation) {
  if (IsChild()) GTEST_SKIP() << "the parent's test";
  EXPECT_EQ(RunSelf("CkptPrepareChild.AJustInTimeSaveWaitsForThePreparation",
                    {"FT_JOB=" + Job() + "-jit", "FT_CKPT_EVERY=0"}),
            0);
  unlink(ckpt::Arena::PathFor(ArenaDir(), Job() + "-jit", Rank()).c_str());
}

TEST(CkptPrepareChild, AJustInTimeSaveWaitsForThePreparation) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptPrepare";
  unlink(ArenaPath().c_str());
  LogFile log;
  ASSERT_TRUE(log.redirected());
  void* dev = RegisterWithThePinHeld();
  ASSERT_TRUE(test_util::WaitUntil([] { return ThePinHold().held() == 1; })) << "the agent never began pinning";
  ASSERT_EQ(ft_step_done(1), FT_OK) << ft_last_error();
  const uint64_t seq = Post(shm::CommandType::kSave, "save-while-preparing");
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(shm::PollAck(Own(), seq).has_value()) << "a save ran before the arena was prepared";
  ThePinHold().hold(0);
  auto ack = WaitAck(seq);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->result, 0) << ack->message;
  ExpectWhole(*CommittedStep(1), dev);

  // Then the warm-up touches every page of both slots (ckpt_agent_prepare.cc): after the save
  // that was waiting, never before it.
  std::string text;
  ASSERT_TRUE(log.WaitFor("touched in", &text)) << "the arena's pages were never all touched; the log:\n" << text;
  const size_t saved = text.find("just-in-time save: ");
  ASSERT_NE(saved, std::string::npos) << text;
  EXPECT_LT(saved, text.find("touched in")) << "the warm-up ran before the save waiting for it:\n" << text;
}

// A process that fails (exit status 3) while its arena is still being pinned: the exit waits for
// the preparation, then saves the last completed step, and the status is the app's own.
TEST(CkptPrepare, AFailingExitDuringThePreparationStillSavesItsStep) {
  if (IsChild()) GTEST_SKIP() << "the parent's test";
  const std::string job = Job() + "-exit";
  const std::string path = ckpt::Arena::PathFor(ArenaDir(), job, Rank());
  unlink(path.c_str());
  EXPECT_EQ(RunSelf("CkptPrepareChild.ExitsWithStatus3WhileThePinIsHeld", {"FT_JOB=" + job, "FT_CKPT_EVERY=0"}), 3);
  ExpectCommittedWhole(path, 1, "the failing exit saved nothing");
  unlink(path.c_str());
  RemoveKeptSegments(job);
}

TEST(CkptPrepareChild, ExitsWithStatus3WhileThePinIsHeld) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptPrepare";
  RegisterWithThePinHeld();
  ASSERT_TRUE(test_util::WaitUntil([] { return ThePinHold().held() == 1; }));
  ASSERT_EQ(ft_step_done(1), FT_OK) << ft_last_error();
  // Released only after exit() began waiting for the preparation.
  std::thread([] {
    std::this_thread::sleep_for(300ms);
    ThePinHold().hold(0);
  }).detach();
  exit(3);
}

// The committed copy of the arena at `path`: its manifest, the slot it is in and the bytes of
// model.weight in it.
void ReadCommittedCopy(const std::string& path, ckpt::Manifest* saved, int* slot, std::vector<uint8_t>* weight) {
  ckpt::Arena arena;
  ASSERT_TRUE(ckpt::Arena::OpenForRead(path, &arena).ok()) << path;
  uint64_t generation = 0;
  ASSERT_TRUE(arena.ReadCommitted(saved, &generation).ok()) << path;
  *slot = arena.committed_slot();
  const ckpt::BufferEntry* w = Entry(*saved, "model.weight");
  ASSERT_NE(w, nullptr);
  weight->assign(arena.data(generation) + w->offset, arena.data(generation) + w->offset + kBytes);
}

// The plan ftworker would write: `saved`'s step of this rank, from the arena of `source_rank`
// on this node (this rank's own, or a DP replica's).
void WritePlan(const ckpt::Manifest& saved, int source_rank) {
  ckpt::NodePlan plan;
  plan.job = Job();
  plan.node = Env("FT_NODE_ID");
  plan.version = 1;
  plan.step = saved.step;
  plan.arena_dir = ArenaDir();
  ckpt::PlanRank line;
  line.rank = Rank();
  line.digest = ckpt::ContentDigest(saved);
  line.sources.push_back({source_rank, plan.node, {"arena"}});
  plan.ranks.push_back(line);
  ASSERT_TRUE(ckpt::WriteNodePlan(ckpt::NodePlanPath(ArenaDir(), Job(), plan.node), plan).ok());
}

// Registers with the pinning of the first slot prepared held, asks for the restore of `step`
// meanwhile: it waits for that slot, restores `expected` into the buffer, and its log line
// (`restored`) comes before the preparation's end, which began with `first`.
void ExpectTheRestoreRunsOnceItsSlotIsPrepared(int64_t expect_step, const std::vector<uint8_t>& expected,
                                               const std::string& restored_line, const std::string& first) {
  LogFile log;
  ASSERT_TRUE(log.redirected());
  void* dev = RegisterWithThePinHeld();  // the first slot reserved and mapped, its pinning held
  ASSERT_TRUE(test_util::WaitUntil([] { return ThePinHold().held() == 1; })) << "the agent never began pinning";
  std::atomic<int> result{-1};
  int64_t step = -1;
  std::thread restore([&] { result = ft_restore(&step); });
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(result.load(), -1) << "the restore ran before the slot it uses was prepared";
  ThePinHold().hold(0);
  restore.join();
  ASSERT_EQ(result.load(), FT_OK) << ft_last_error();
  EXPECT_EQ(step, expect_step);
  EXPECT_TRUE(DeviceBytes(dev, kBytes) == expected);

  std::string text;
  ASSERT_TRUE(log.WaitFor("prepared in", &text)) << "the arena's preparation never ended; the log:\n" << text;
  const size_t restored = text.find(restored_line);
  ASSERT_NE(restored, std::string::npos) << text;
  EXPECT_LT(restored, text.find("prepared in")) << "the restore waited for the whole arena:\n" << text;
  EXPECT_NE(text.find(first), std::string::npos) << text;
}

// A fresh arena (a new node restoring a peer's copy) is prepared one slot at a time: slot 0,
// which the restore into it writes, first; a restore asked for meanwhile waits for that slot and
// runs before the other slot is prepared (ckpt_agent_prepare.cc).
TEST(CkptPrepare, AFreshArenasRestoreRunsOnceItsFirstSlotIsPrepared) {
  if (IsChild()) GTEST_SKIP() << "the parent's test";
  const std::string job = Job() + "-fresh";
  const std::string peer = ckpt::Arena::PathFor(ArenaDir(), job, Rank() + 1);
  unlink(peer.c_str());
  ASSERT_EQ(RunSelf("CkptPrepareChild.SavesSteps", {"FT_JOB=" + job, "FT_RANK=" + std::to_string(Rank() + 1),
                                                      "FT_CKPT_EVERY=1"}),
            0);
  EXPECT_EQ(RunSelf("CkptPrepareChild.RestoresAPeersCopyIntoAFreshArena", {"FT_JOB=" + job, "FT_CKPT_EVERY=0"}), 0);
  unlink(peer.c_str());
  unlink(ckpt::Arena::PathFor(ArenaDir(), job, Rank()).c_str());
  unlink(ckpt::NodePlanPath(ArenaDir(), job, Env("FT_NODE_ID")).c_str());
}

// Saves steps 1 to FT_TEST_SAVE_STEPS (default 1), the buffer filled anew for each: with two
// slots the last one's copy is in slot (steps - 1) % 2.
TEST(CkptPrepareChild, SavesSteps) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptPrepare";
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, kBytes), cudaSuccess);
  ASSERT_EQ(ft_register("model.weight", dev, kBytes), FT_OK) << ft_last_error();
  ASSERT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  const int steps = std::max(1, std::atoi(Env("FT_TEST_SAVE_STEPS", "1").c_str()));
  for (int step = 1; step <= steps; ++step) {
    FillDevice(dev, kBytes, 6 + step);
    ASSERT_EQ(ft_step_done(step), FT_OK) << ft_last_error();
    ExpectWhole(*CommittedStep(step), dev);
  }
}

TEST(CkptPrepareChild, RestoresAPeersCopyIntoAFreshArena) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptPrepare";
  unlink(ArenaPath().c_str());
  ckpt::Manifest saved;
  int slot = -1;
  std::vector<uint8_t> expected;
  ASSERT_NO_FATAL_FAILURE(ReadCommittedCopy(ckpt::Arena::PathFor(ArenaDir(), Job(), Rank() + 1), &saved, &slot, &expected));
  ASSERT_NO_FATAL_FAILURE(WritePlan(saved, Rank() + 1));  // step 1 from the peer's arena (a DP replica)
  ExpectTheRestoreRunsOnceItsSlotIsPrepared(1, expected, "restored step 1 from arena of rank", "slot 0 first");
}

// A rank relaunched in place restores its own arena's committed copy: that copy's slot (here
// slot 1, the second save's) is mapped and pinned first, and the restore runs before the other
// slot is (ckpt_agent_prepare.cc): pinning a slot the restore does not read would cost a large
// rank seconds on the relaunch's critical path.
TEST(CkptPrepare, ARelaunchedRanksRestoreRunsOnceTheCommittedSlotIsPrepared) {
  if (IsChild()) GTEST_SKIP() << "the parent's test";
  const std::string job = Job() + "-inplace";
  unlink(ckpt::Arena::PathFor(ArenaDir(), job, Rank()).c_str());
  ASSERT_EQ(RunSelf("CkptPrepareChild.SavesSteps", {"FT_JOB=" + job, "FT_CKPT_EVERY=1", "FT_TEST_SAVE_STEPS=2"}), 0);
  EXPECT_EQ(RunSelf("CkptPrepareChild.RestoresItsOwnCommittedCopy", {"FT_JOB=" + job, "FT_CKPT_EVERY=0"}), 0);
  unlink(ckpt::Arena::PathFor(ArenaDir(), job, Rank()).c_str());
  unlink(ckpt::NodePlanPath(ArenaDir(), job, Env("FT_NODE_ID")).c_str());
}

TEST(CkptPrepareChild, RestoresItsOwnCommittedCopy) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptPrepare";
  ckpt::Manifest saved;
  int slot = -1;
  std::vector<uint8_t> expected;
  ASSERT_NO_FATAL_FAILURE(ReadCommittedCopy(ArenaPath(), &saved, &slot, &expected));
  ASSERT_EQ(saved.step, 2);
  ASSERT_EQ(slot, 1) << "the second save's copy is not in slot 1";
  ASSERT_NO_FATAL_FAILURE(WritePlan(saved, Rank()));
  ExpectTheRestoreRunsOnceItsSlotIsPrepared(2, expected, "restored step 2 from own arena", "slot 1 first");
}

// The warm-up (every page of the slots touched once) waits until the process has something to
// save: a step completed or a restore. Before that it would only compete with the app's start-up.
TEST(CkptPrepare, TheWarmUpBeginsOnceThereIsSomethingToSave) {
  if (IsChild()) GTEST_SKIP() << "the parent's test";
  const std::string job = Job() + "-warm";
  EXPECT_EQ(RunSelf("CkptPrepareChild.WarmsUpAfterTheFirstStep", {"FT_JOB=" + job, "FT_CKPT_EVERY=0"}), 0);
  unlink(ckpt::Arena::PathFor(ArenaDir(), job, Rank()).c_str());
}

TEST(CkptPrepareChild, WarmsUpAfterTheFirstStep) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptPrepare";
  unlink(ArenaPath().c_str());
  LogFile log;
  ASSERT_TRUE(log.redirected());
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, kBytes), cudaSuccess);
  FillDevice(dev, kBytes, 3);
  ASSERT_EQ(ft_register("model.weight", dev, kBytes), FT_OK) << ft_last_error();
  ASSERT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  std::string text;
  ASSERT_TRUE(log.WaitFor("prepared in", &text)) << "the arena was never prepared";
  std::this_thread::sleep_for(500ms);  // what a 48 MiB warm-up takes here several times over
  EXPECT_EQ(log.Text().find("touched in"), std::string::npos) << "the warm-up ran with nothing to save";
  ASSERT_EQ(ft_step_done(1), FT_OK) << ft_last_error();
  EXPECT_TRUE(log.WaitFor("touched in", &text)) << "no warm-up after the first step";
}

}  // namespace
}  // namespace ft::preload::ckpt_test

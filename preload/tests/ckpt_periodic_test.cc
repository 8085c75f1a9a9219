// Periodic saves (FT_CKPT_EVERY=2, and kSaveAtStep as `ftmaster save` sends it), in one
// process (CTest preload.ckpt_periodic).
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "jitckpt/checksum.h"
#include "preload/tests/ckpt_test_util.h"

namespace ft::preload::ckpt_test {
namespace {

constexpr size_t kParamBytes = (6u << 20) + 4096;
constexpr size_t kStateBytes = 1u << 20;

struct State {
  void* param = nullptr;
  void* state = nullptr;
};

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
    return Register("param", "state");
  }();
  return s;
}

std::vector<uint8_t> Saved(const Committed& c, const std::string& name) {
  const ckpt::BufferEntry* e = Entry(c.manifest, name);
  if (e == nullptr) return {};
  return std::vector<uint8_t>(c.data() + e->offset, c.data() + e->offset + e->bytes);
}

TEST(CkptPeriodic, StepDoneReturnsOnceTheStepIsCopied) {
  State& s = Parent();
  FillDevice(s.param, kParamBytes, 1);
  FillDevice(s.state, kStateBytes, 2);
  ASSERT_EQ(ft_step_done(1), FT_OK);
  EXPECT_EQ(ReadArena()->status.code(), StatusCode::kNotFound) << "step 1 is not a multiple of 2";
  std::vector<uint8_t> param2 = DeviceBytes(s.param, kParamBytes);
  std::vector<uint8_t> state2 = DeviceBytes(s.state, kStateBytes);
  ASSERT_EQ(ft_step_done(2), FT_OK) << ft_last_error();
  // The next step's update, right away: it must not reach the copy of step 2.
  FillDevice(s.param, kParamBytes, 3);
  FillDevice(s.state, kStateBytes, 4);
  std::unique_ptr<Committed> c;
  ASSERT_TRUE(test_util::WaitUntil([&] {
    c = ReadArena();
    return c->status.ok() && c->manifest.step == 2;
  })) << c->status.ToString();
  EXPECT_FALSE(c->manifest.torn);
  EXPECT_TRUE(Saved(*c, "param") == param2);
  EXPECT_TRUE(Saved(*c, "state") == state2);
  for (size_t i = 0; i < c->manifest.chunk_count(); ++i) EXPECT_TRUE(ckpt::ChunkVerifies(c->manifest, i, c->data()));
}

TEST(CkptPeriodic, SaveAtStepIsTakenAndAcknowledgedAtTheNextStep) {
  State& s = Parent();
  uint64_t seq = Post(shm::CommandType::kSaveAtStep, "periodic-1");
  // Not before the step: a few poller rounds (each advances the heartbeat) see it unanswered.
  uint64_t rounds = Own().header()->heartbeat_count.load() + 5;
  ASSERT_TRUE(test_util::WaitUntil([&] { return Own().header()->heartbeat_count.load() >= rounds; }));
  EXPECT_FALSE(shm::PollAck(Own(), seq).has_value()) << "acknowledged before the step ran";
  std::vector<uint8_t> param3 = DeviceBytes(s.param, kParamBytes);
  ASSERT_EQ(ft_step_done(3), FT_OK);
  auto ack = WaitAck(seq);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->result, 0) << ack->message;
  EXPECT_TRUE(StartsWith(ack->message, "saved step=3 ")) << ack->message;
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  EXPECT_EQ(c->manifest.step, 3);
  EXPECT_TRUE(Saved(*c, "param") == param3);
}

// Last: its child overwrites the arena. A process that exits right after the periodic save of
// its last step returned from ft_step_done still commits it (the checksums and the commit run
// after the copy, on the agent thread; the exit waits for them).
TEST(CkptPeriodic, SaveOfTheLastStepIsCommittedAtExit) {
  Parent();
  ASSERT_EQ(RunSelf("CkptPeriodicChild.ExitsRightAfterAPeriodicSave", {}), 0);
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok()) << c->status.ToString();
  EXPECT_EQ(c->manifest.step, 42);
}

TEST(CkptPeriodicChild, ExitsRightAfterAPeriodicSave) {
  if (Env("FT_TEST_CKPT_CHILD").empty()) GTEST_SKIP() << "run by CkptPeriodic";
  // A large host buffer: its checksums take long enough to outlast an exit that would not
  // wait for them. Never freed: freeing it would slow the exit down.
  auto* host = new std::vector<uint8_t>(256u << 20, 42);
  if (ft_register("host.big", host->data(), host->size()) != FT_OK) _exit(2);
  State s = Register("param", "state");
  FillDevice(s.param, kParamBytes, 42);
  if (ft_step_done(42) != FT_OK) _exit(3);
  exit(0);
}

}  // namespace
}  // namespace ft::preload::ckpt_test

// ft_restore, in one process (CTest preload.ckpt_restore, FT_CKPT_EVERY=3: ft_step_done(3)
// saves the step restored); the restarted rank, the mismatching layout and the missing plan
// are children of it (this binary run again: same job and rank, so the same arena).
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
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

// The plan ftworker would write for this node: `step` of this rank from its own arena.
void WritePlan(int64_t step, uint64_t digest) {
  ckpt::NodePlan plan;
  plan.job = Job();
  plan.node = Env("FT_NODE_ID");
  plan.version = 1;
  plan.step = step;
  plan.arena_dir = ArenaDir();
  if (step >= 0) {
    ckpt::PlanRank r;
    r.rank = Rank();
    r.digest = digest;
    r.sources.push_back({Rank(), plan.node, {"arena"}});
    plan.ranks.push_back(r);
  }
  Status st = ckpt::WriteNodePlan(ckpt::NodePlanPath(ArenaDir(), Job(), plan.node), plan);
  ASSERT_TRUE(st.ok()) << st.ToString();
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

TEST(CkptChild, NoPlan) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptRestore";
  Register("param", "state");
  int64_t step = -1;
  EXPECT_EQ(ft_restore(&step), FT_TIMEOUT);
  EXPECT_NE(std::string(ft_last_error()).find("ftworker"), std::string::npos) << ft_last_error();
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

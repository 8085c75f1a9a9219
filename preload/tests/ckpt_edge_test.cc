// The checkpoint agent's edges, each its own process (CTest entries in CMakeLists.txt): a save
// with nothing registered, an arena that does not fit, libft.so disabled.
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <nccl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "jitckpt/checksum.h"
#include "preload/tests/ckpt_test_util.h"

namespace ft::preload::ckpt_test {
namespace {

TEST(CkptNothing, SaveWithNothingRegisteredIsAnsweredNotFound) {
  auto ack = WaitAck(Post(shm::CommandType::kSave, "save-1"));
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->result, static_cast<int32_t>(StatusCode::kNotFound));
  EXPECT_EQ(ack->message, "nothing registered");
  // Registration ended with nothing in it: still nothing to save, and no arena.
  ASSERT_EQ(ft_register_end(), FT_OK);
  ack = WaitAck(Post(shm::CommandType::kSave, "save-2"));
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->result, static_cast<int32_t>(StatusCode::kNotFound));
  EXPECT_EQ(ack->message, "nothing registered");
  ack = WaitAck(Post(shm::CommandType::kSaveAtStep, "periodic-1"));
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->message, "nothing registered");
  EXPECT_EQ(access(ArenaPath().c_str(), F_OK), -1);
  EXPECT_EQ(ft_step_done(1), FT_OK);
}

// FT_CKPT_ARENA_DIR is a small directory here: 1 PiB of registered state cannot fit. The
// registration says so, nothing is allocated, and the app's CUDA and NCCL work on.
TEST(CkptNoSpace, ArenaThatDoesNotFitIsRefusedAndTrainingRunsOn) {
  mkdir(ArenaDir().c_str(), 0700);
  unlink(ArenaPath().c_str());
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 4096), cudaSuccess);
  std::vector<uint8_t> host(4096);
  ASSERT_EQ(ft_register("weights", dev, 4096), FT_OK);
  // Registration only records the size; nothing is read before a save.
  ASSERT_EQ(ft_register("huge", host.data(), size_t{1} << 50), FT_OK);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ft_register_end(), FT_NO_SPACE);
  std::string why = ft_last_error();
  EXPECT_NE(why.find("training continues without checkpoints"), std::string::npos) << why;
  EXPECT_NE(why.find(ArenaDir()), std::string::npos) << why;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
      << "refused by the size check, not by writing";
  EXPECT_EQ(access(ArenaPath().c_str(), F_OK), -1) << "nothing allocated";
  EXPECT_EQ(ft_register_end(), FT_NO_SPACE);
  EXPECT_EQ(ft_step_done(1), FT_NO_SPACE);

  // A save command is answered with the reason, never left hanging.
  auto ack = WaitAck(Post(shm::CommandType::kSave, "save-1"));
  ASSERT_TRUE(ack);
  EXPECT_NE(ack->result, 0);
  EXPECT_NE(ack->message.find("no host arena"), std::string::npos) << ack->message;

  // The app's own calls: unchanged.
  ncclComm_t comm;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  std::vector<float> in(1024, 3.0f), out(1024, 0.0f);
  ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, s), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

// FT_ENABLE=0: every entry point answers FT_DISABLED and does nothing.
TEST(CkptDisabled, EveryEntryPointAnswersDisabled) {
  ASSERT_TRUE(ft_available());
  EXPECT_EQ(ft_version(), FT_ABI_VERSION);
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 64), cudaSuccess);
  int64_t step = -5;
  EXPECT_EQ(ft_set_shard(0, 0, 0), FT_DISABLED);
  EXPECT_EQ(ft_register("w", dev, 64), FT_DISABLED);
  EXPECT_NE(std::string(ft_last_error()).find("not active"), std::string::npos) << ft_last_error();
  EXPECT_EQ(ft_register(nullptr, nullptr, 0), FT_DISABLED);
  EXPECT_EQ(ft_register_end(), FT_DISABLED);
  EXPECT_EQ(ft_update_begin(nullptr), FT_DISABLED);
  EXPECT_EQ(ft_step_done(1), FT_DISABLED);
  EXPECT_EQ(ft_restore(&step), FT_DISABLED);
  EXPECT_EQ(ft_restore(nullptr), FT_DISABLED);
  EXPECT_EQ(step, -5);
  for (int r = 0; r <= 10; ++r) EXPECT_NE(ft_result_string(r), nullptr);
  EXPECT_EQ(access(ArenaPath().c_str(), F_OK), -1);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

// A device-to-host copy that fails (cuda_fail_shim.cc, preloaded after libft.so, stands for
// a GPU fault): the save is acknowledged as failed with the runtime's words, the arena keeps
// the copy committed before (two slots; never a half-written one), the app's own calls are
// untouched, and the next save works again.
TEST(CkptCudaError, FailedCopyIsAFailedSaveAndTheArenaKeepsItsCommittedCopy) {
  using Arm = void (*)(int);
  auto arm = reinterpret_cast<Arm>(dlsym(RTLD_DEFAULT, "gpusim_shim_fail_d2h"));
  ASSERT_NE(arm, nullptr) << "cuda_fail_shim.so is not preloaded";
  unlink(ArenaPath().c_str());
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 3 << 20), cudaSuccess);
  FillDevice(dev, 3 << 20, 5);
  ASSERT_EQ(ft_register("w", dev, 3 << 20), FT_OK);
  ASSERT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  ASSERT_EQ(ft_step_done(1), FT_OK);
  auto ack = WaitAck(Post(shm::CommandType::kSave, "save-1"));
  ASSERT_TRUE(ack && ack->result == 0) << (ack ? ack->message : "no ack");
  auto first = ReadArena();
  ASSERT_TRUE(first->status.ok());
  auto expect_first = [&](const char* what) {
    auto c = ReadArena();
    ASSERT_TRUE(c->status.ok()) << what << ": " << c->status.ToString();
    EXPECT_EQ(c->manifest.step, 1) << what;
    EXPECT_EQ(c->generation, first->generation) << what;
    for (size_t i = 0; i < c->manifest.chunk_count(); ++i) {
      EXPECT_TRUE(ckpt::ChunkVerifies(c->manifest, i, c->data())) << what << ", chunk " << i;
    }
  };

  arm(1);
  ack = WaitAck(Post(shm::CommandType::kSave, "save-2"));
  ASSERT_TRUE(ack);
  EXPECT_NE(ack->result, 0);
  EXPECT_NE(ack->message.find("cudaMemcpyAsync"), std::string::npos) << ack->message;
  expect_first("after a failed just-in-time save");
  // A periodic save's failure (FT_CKPT_EVERY=10 here) is ft_step_done's.
  EXPECT_EQ(ft_step_done(10), FT_CUDA_ERROR);
  EXPECT_NE(std::string(ft_last_error()).find("cudaMemcpyAsync"), std::string::npos) << ft_last_error();
  expect_first("after a failed periodic save");
  arm(0);

  ack = WaitAck(Post(shm::CommandType::kSave, "save-3"));
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->result, 0) << ack->message;
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  EXPECT_EQ(c->manifest.step, 10);
  EXPECT_TRUE(DeviceBytes(dev, 3 << 20) == std::vector<uint8_t>(c->data() + c->manifest.buffers[0].offset,
                                                               c->data() + c->manifest.buffers[0].offset + (3 << 20)));
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

}  // namespace
}  // namespace ft::preload::ckpt_test

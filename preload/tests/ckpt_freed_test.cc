// A registered buffer the app freed (cudaFree of the allocation it lies in): every later save
// and restore refuses, naming it, and nothing is copied — not from memory the app gave back,
// not into memory the runtime may have handed to another allocation. The arena keeps its
// committed copy, with one slot too (CTest preload.ckpt_freed: FT_CKPT_ARENA_SLOTS=1,
// FT_CKPT_EVERY=3). A failing exit after such a free ends with its own status and saves
// nothing (a child: this binary run again).
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "jitckpt/checksum.h"
#include "preload/tests/ckpt_test_util.h"

namespace ft::preload::ckpt_test {
namespace {

constexpr size_t kAlloc = 8u << 20;
constexpr size_t kAt = 2u << 20;  // the buffer is a slice of its allocation, as a tensor is
constexpr size_t kBytes = 3u << 20;

bool IsChild() { return Env("FT_TEST_CKPT_CHILD") == "1"; }

// The arena's committed copy is `step`, every chunk verifies, and it holds `bytes`.
void ExpectCommitted(int64_t step, const std::vector<uint8_t>& bytes, const char* when) {
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok()) << when << ": " << c->status.ToString();
  EXPECT_EQ(c->manifest.step, step) << when;
  for (size_t i = 0; i < c->manifest.chunk_count(); ++i) {
    EXPECT_TRUE(ckpt::ChunkVerifies(c->manifest, i, c->data())) << when << ", chunk " << i;
  }
  const ckpt::BufferEntry* e = Entry(c->manifest, "w");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(std::vector<uint8_t>(c->data() + e->offset, c->data() + e->offset + e->bytes) == bytes) << when;
}

// Registers a slice of a fresh allocation and commits step 1 by a save command.
uint8_t* RegisterAndSaveStep1(std::vector<uint8_t>* saved) {
  unlink(ArenaPath().c_str());
  void* alloc = nullptr;
  EXPECT_EQ(cudaMalloc(&alloc, kAlloc), cudaSuccess);
  uint8_t* w = static_cast<uint8_t*>(alloc) + kAt;
  FillDevice(w, kBytes, 9);
  EXPECT_EQ(ft_register("w", w, kBytes), FT_OK) << ft_last_error();
  EXPECT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  EXPECT_EQ(ft_step_done(1), FT_OK) << ft_last_error();
  auto ack = WaitAck(Post(shm::CommandType::kSave, "save-1"));
  EXPECT_TRUE(ack && ack->result == 0) << (ack ? ack->message : "no ack");
  *saved = DeviceBytes(w, kBytes);
  return w;
}

TEST(CkptFreed, SavesAndRestoresAfterTheAppFreedARegisteredBufferAreRefusedAndTheCopyStays) {
  std::vector<uint8_t> saved;
  uint8_t* w = RegisterAndSaveStep1(&saved);
  ExpectCommitted(1, saved, "after the first save");

  // Memory that holds no registered buffer comes and goes freely.
  void* other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaFree(other), cudaSuccess);
  ASSERT_EQ(ft_step_done(2), FT_OK) << ft_last_error();
  auto ack = WaitAck(Post(shm::CommandType::kSave, "save-2"));
  ASSERT_TRUE(ack && ack->result == 0) << (ack ? ack->message : "no ack");
  ExpectCommitted(2, saved, "after an unrelated free");

  // The allocation the buffer is a slice of goes back.
  ASSERT_EQ(cudaFree(w - kAt), cudaSuccess);
  ack = WaitAck(Post(shm::CommandType::kSave, "save-3"));
  ASSERT_TRUE(ack);
  EXPECT_NE(ack->result, 0);
  EXPECT_NE(ack->message.find("buffer 'w' was freed by the app"), std::string::npos) << ack->message;
  ExpectCommitted(2, saved, "after a save command");
  // FT_CKPT_EVERY=3: the periodic save of step 3 is refused, and ft_step_done says why.
  EXPECT_EQ(ft_step_done(3), FT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ft_last_error()).find("'w' was freed"), std::string::npos) << ft_last_error();
  ExpectCommitted(2, saved, "after a periodic save");

  // A restore would write into memory that is no longer the app's.
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok());
  WritePlan(2, ckpt::ContentDigest(c->manifest));
  int64_t step = -1;
  EXPECT_EQ(ft_restore(&step), FT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ft_last_error()).find("'w' was freed"), std::string::npos) << ft_last_error();
  EXPECT_EQ(step, -1);
  unlink(ckpt::NodePlanPath(ArenaDir(), Job(), Env("FT_NODE_ID")).c_str());
}

// A program that freed its buffers and then fails: the exit save would copy from them. It
// saves nothing, and the process ends with its own status (not a fault in the copy).
TEST(CkptFreed, AFailingExitAfterTheFreeEndsWithItsStatusAndSavesNothing) {
  const std::string job = Job() + "-exit";  // the child's own arena and segment
  const std::string path = ckpt::Arena::PathFor(ArenaDir(), job, Rank());
  EXPECT_EQ(RunSelf("CkptFreedChild.FreesThenExitsWithStatus1", {"FT_JOB=" + job}), 1);
  ExpectCommittedWhole(path, 1, "the exit save wrote over the committed copy");
  unlink(path.c_str());
  RemoveKeptSegments(job);
}

TEST(CkptFreedChild, FreesThenExitsWithStatus1) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptFreed.AFailingExitAfterTheFreeEndsWithItsStatusAndSavesNothing";
  std::vector<uint8_t> saved;
  uint8_t* w = RegisterAndSaveStep1(&saved);
  ExpectCommitted(1, saved, "child, after the first save");
  FillDevice(w, kBytes, 10);
  ASSERT_EQ(ft_step_done(2), FT_OK) << ft_last_error();  // step 2: completed, not saved yet
  ASSERT_EQ(cudaFree(w - kAt), cudaSuccess);
  exit(1);  // a failing exit saves the last completed step, unless its buffers are gone
}

}  // namespace
}  // namespace ft::preload::ckpt_test

// Just-in-time saves of the checkpoint agent, in a gpusim CUDA + NCCL program under
// LD_PRELOAD=libft.so: registration of device and host buffers, a save posted through the
// mailbox as ftworker posts it while the app's stream is stuck behind a collective whose peer
// never comes, coalescing, torn marking, bad arguments. One process (CTest preload.ckpt_save):
// the tests run in order and share the registration.
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "jitckpt/checksum.h"
#include "preload/tests/ckpt_test_util.h"

namespace ft::preload::ckpt_test {
namespace {

// Sizes that exercise the layout: more chunks (1 MiB, FT_CKPT_CHUNK) than the agent keeps in
// flight, a buffer that is not a multiple of the alignment, chunks spanning two buffers.
constexpr size_t kWeightBytes = 40u << 20;
constexpr size_t kMomentBytes = (5u << 20) + 123;
constexpr size_t kHostBytes = 10000;

struct State {
  void* weight = nullptr;  // device
  void* moment = nullptr;  // device
  std::vector<uint8_t> host = std::vector<uint8_t>(kHostBytes);  // host (pageable)
};

State& Registered() {
  static State* s = [] {
    auto* st = new State;
    unlink(ArenaPath().c_str());  // a previous run's copy would read as this one's
    EXPECT_EQ(cudaMalloc(&st->weight, kWeightBytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&st->moment, kMomentBytes), cudaSuccess);
    FillDevice(st->weight, kWeightBytes, 1);
    FillDevice(st->moment, kMomentBytes, 2);
    for (size_t i = 0; i < kHostBytes; ++i) st->host[i] = static_cast<uint8_t>(i ^ 0x5a);
    EXPECT_EQ(ft_set_shard(0, 0, 1), FT_OK);
    EXPECT_EQ(ft_register("model.weight", st->weight, kWeightBytes), FT_OK) << ft_last_error();
    EXPECT_EQ(ft_register("optim.moment", st->moment, kMomentBytes), FT_OK) << ft_last_error();
    EXPECT_EQ(ft_register("host.counters", st->host.data(), kHostBytes), FT_OK) << ft_last_error();
    EXPECT_EQ(ft_register_end(), FT_OK) << ft_last_error();
    return st;
  }();
  return *s;
}

// Every chunk verifies and every registered buffer's bytes are in the arena at its offset.
void ExpectArenaHolds(const Committed& c) {
  const ckpt::Manifest& m = c.manifest;
  ASSERT_EQ(m.chunk_count(), m.chunk_checksums.size());
  for (size_t i = 0; i < m.chunk_count(); ++i) {
    ASSERT_TRUE(ckpt::ChunkVerifies(m, i, c.data())) << "chunk " << i;
  }
  State& s = Registered();
  const ckpt::BufferEntry* w = Entry(m, "model.weight");
  const ckpt::BufferEntry* mo = Entry(m, "optim.moment");
  const ckpt::BufferEntry* h = Entry(m, "host.counters");
  ASSERT_TRUE(w && mo && h);
  EXPECT_EQ(mo->bytes, kMomentBytes);
  EXPECT_TRUE(DeviceBytes(s.weight, kWeightBytes) ==
              std::vector<uint8_t>(c.data() + w->offset, c.data() + w->offset + kWeightBytes));
  EXPECT_TRUE(DeviceBytes(s.moment, kMomentBytes) ==
              std::vector<uint8_t>(c.data() + mo->offset, c.data() + mo->offset + kMomentBytes));
  EXPECT_EQ(std::memcmp(s.host.data(), c.data() + h->offset, kHostBytes), 0);
}

std::string Field(const std::string& message, const std::string& key) {
  size_t at = message.find(key + "=");
  if (at == std::string::npos) return "";
  at += key.size() + 1;
  return message.substr(at, message.find(' ', at) - at);
}

TEST(CkptSave, BadArgumentsAreRefusedWithAReason) {
  ASSERT_TRUE(ft_available());
  EXPECT_EQ(ft_version(), FT_ABI_VERSION);
  char byte = 0;
  EXPECT_EQ(ft_register(nullptr, &byte, 1), FT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ft_last_error()), "");
  EXPECT_EQ(ft_register("", &byte, 1), FT_INVALID_ARGUMENT);
  EXPECT_EQ(ft_register("x", nullptr, 1), FT_INVALID_ARGUMENT);
  EXPECT_EQ(ft_register("x", &byte, 0), FT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ft_last_error()).find("zero bytes"), std::string::npos) << ft_last_error();
  EXPECT_EQ(ft_register(std::string(300, 'n').c_str(), &byte, 1), FT_INVALID_ARGUMENT);
  EXPECT_EQ(ft_set_shard(-2, 0, 0), FT_INVALID_ARGUMENT);
  EXPECT_EQ(ft_restore(nullptr), FT_INVALID_ARGUMENT);
  Registered();
  EXPECT_EQ(ft_register("model.weight", &byte, 1), FT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ft_last_error()).find("after ft_register_end"), std::string::npos)
      << ft_last_error();
  EXPECT_EQ(ft_set_shard(1, 1, 1), FT_INVALID_ARGUMENT);
  EXPECT_EQ(ft_register_end(), FT_OK);  // again: nothing changes
  EXPECT_STRNE(ft_result_string(FT_NO_SPACE), "");
}

TEST(CkptSave, RegistrationReservesTheArena) {
  Registered();
  auto c = ReadArena();
  EXPECT_EQ(c->status.code(), StatusCode::kNotFound) << "nothing saved yet: " << c->status.ToString();
  struct stat st {};
  ASSERT_EQ(stat(ArenaPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_GE(static_cast<uint64_t>(st.st_size), kWeightBytes + kMomentBytes + kHostBytes);
}

// Before the first ft_step_done (and with no restore) the registered state is the app's
// initialisation, not a step: a save command is refused and nothing is committed.
TEST(CkptSave, SaveBeforeTheFirstStepIsRefused) {
  Registered();
  auto ack = WaitAck(Post(shm::CommandType::kSave, "save-0"));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->result, static_cast<int32_t>(StatusCode::kUnavailable)) << ack->message;
  EXPECT_NE(ack->message.find("no step completed or restored yet"), std::string::npos) << ack->message;
  EXPECT_EQ(ReadArena()->status.code(), StatusCode::kNotFound) << "nothing committed";
}

// The heart of a just-in-time save: the app's stream waits for a peer that never comes (the
// second member of the communicator never calls the collective); the save still completes.
TEST(CkptSave, SavePostedThroughTheMailboxCompletesWhileTheAppStreamIsStuck) {
  Registered();
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  cudaStream_t app, peer;
  ASSERT_EQ(cudaStreamCreate(&app), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&peer), cudaSuccess);
  std::vector<float> grad(1 << 16, 1.0f), sum0(1 << 16), sum1(1 << 16);
  ASSERT_EQ(ft_step_done(7), FT_OK);
  ASSERT_EQ(ncclAllReduce(grad.data(), sum0.data(), grad.size(), ncclFloat32, ncclSum, comms[0], app),
            ncclSuccess);
  // The host waits for the collective outside an update window (as a .item() would): the
  // registered state, device and host, is step 7's (a host inside its window writes its host
  // buffers: CkptSave.SaveTakenWhileTheUpdateMayRunIsTorn; a device behind its host:
  // ckpt_device_order_test.cc).

  uint64_t seq = Post(shm::CommandType::kSave, "save-1");
  auto ack = WaitAck(seq);
  ASSERT_TRUE(ack.has_value()) << "no ack while the app's stream is stuck";
  EXPECT_EQ(ack->result, 0) << ack->message;
  EXPECT_TRUE(StartsWith(ack->message, "saved step=7 digest=")) << ack->message;
  EXPECT_EQ(Field(ack->message, "torn"), "0") << "nothing was updated behind the hung collective";
  EXPECT_EQ(cudaStreamQuery(app), cudaErrorNotReady) << "the app's stream is still stuck";

  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok()) << c->status.ToString();
  EXPECT_EQ(c->manifest.step, 7);
  EXPECT_FALSE(c->manifest.torn);
  EXPECT_EQ(c->manifest.rank, Rank());
  EXPECT_EQ(c->manifest.job, Job());
  EXPECT_EQ(c->manifest.dp, 1);
  EXPECT_EQ(c->manifest.chunk_bytes, 1u << 20);
  EXPECT_GT(c->manifest.chunk_count(), 32u);
  EXPECT_EQ(Field(ack->message, "digest"), ckpt::DigestHex(ckpt::ContentDigest(c->manifest)));
  EXPECT_EQ(Field(ack->message, "bytes"), std::to_string(c->manifest.data_bytes));
  ExpectArenaHolds(*c);

  // The peer arrives: the collective completes, the app's stream goes on.
  ASSERT_EQ(ncclAllReduce(grad.data(), sum1.data(), grad.size(), ncclFloat32, ncclSum, comms[1], peer),
            ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(app), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(peer), cudaSuccess);
  EXPECT_EQ(sum0[0], 2.0f);
  ASSERT_EQ(ft_step_done(8), FT_OK);
  for (ncclComm_t comm : comms) ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Two commands posted back to back arrive together only if the agent reads the second before
// its save of the first ends (a few ms); on a loaded machine this thread may lose the CPU
// between the two posts, and two saves, one after the other, are then right. So the pair is
// posted up to five times: every pair must be saved, and one pair at least by one save.
TEST(CkptSave, SaveCommandsArrivingTogetherAreServedByOneSave) {
  Registered();
  bool coalesced = false;
  for (int attempt = 0; attempt < 5 && !coalesced; ++attempt) {
    auto before = ReadArena();
    ASSERT_TRUE(before->status.ok()) << before->status.ToString();
    uint64_t first = Post(shm::CommandType::kSave, "save-2");
    uint64_t second = Post(shm::CommandType::kSave, "save-3");
    auto a = WaitAck(first), b = WaitAck(second);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->result, 0) << a->message;
    EXPECT_EQ(a->result, b->result) << b->message;
    if (a->message != b->message) continue;  // two saves: the second arrived after the first
    coalesced = true;  // both acknowledged with one save's outcome
    auto after = ReadArena();
    ASSERT_TRUE(after->status.ok());
    // One save: it went to the other slot of the two (a second would have come back to this one).
    EXPECT_NE(after->data(), before->data());
    EXPECT_NE(after->generation, before->generation);
    EXPECT_EQ(after->manifest.step, 8);
  }
  EXPECT_TRUE(coalesced) << "no pair of save commands posted together was served by one save";
}

TEST(CkptSave, SaveTakenWhileTheUpdateMayRunIsTorn) {
  State& s = Registered();
  auto whole = ReadArena();
  ASSERT_TRUE(whole->status.ok()) << whole->status.ToString();
  ASSERT_FALSE(whole->manifest.torn);
  // The update's stream is unknown: it may already be writing.
  ASSERT_EQ(ft_update_begin(nullptr), FT_OK);
  auto ack = WaitAck(Post(shm::CommandType::kSave, "save-4"));
  ASSERT_TRUE(ack);
  EXPECT_EQ(Field(ack->message, "torn"), "1") << ack->message;
  // The torn copy does not hide the whole one: it stays the committed copy, unchanged.
  auto kept = ReadArena();
  ASSERT_TRUE(kept->status.ok()) << kept->status.ToString();
  EXPECT_FALSE(kept->manifest.torn) << "a torn copy replaced the whole copy of step " << whole->manifest.step;
  EXPECT_EQ(kept->manifest, whole->manifest);
  EXPECT_EQ(kept->generation, whole->generation);

  // The update's stream has reached the update: its device work may have begun.
  cudaStream_t idle;
  ASSERT_EQ(cudaStreamCreate(&idle), cudaSuccess);
  ASSERT_EQ(ft_update_begin(idle), FT_OK);
  ASSERT_EQ(cudaStreamSynchronize(idle), cudaSuccess);
  ack = WaitAck(Post(shm::CommandType::kSave, "save-5"));
  ASSERT_TRUE(ack);
  EXPECT_EQ(Field(ack->message, "torn"), "1") << ack->message;

  // The step completed: the state is whole again.
  FillDevice(s.moment, kMomentBytes, 9);
  ASSERT_EQ(ft_step_done(9), FT_OK);
  ack = WaitAck(Post(shm::CommandType::kSave, "save-6"));
  ASSERT_TRUE(ack);
  EXPECT_TRUE(StartsWith(ack->message, "saved step=9 ")) << ack->message;
  EXPECT_EQ(Field(ack->message, "torn"), "0") << ack->message;
  auto c = ReadArena();
  EXPECT_FALSE(c->manifest.torn);
  ExpectArenaHolds(*c);
}

TEST(CkptSave, OtherCommandsAreStillAnsweredWhileASaveIsUnacknowledged) {
  Registered();
  uint64_t save = Post(shm::CommandType::kSave, "save-7");
  uint64_t message = Post(shm::CommandType::kMessage, "hello");
  auto m = WaitAck(message);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->result, static_cast<int32_t>(StatusCode::kUnsupported));
  ASSERT_TRUE(WaitAck(save));
}

TEST(CkptSave, ForkedChildIsDisabled) {
  Registered();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char byte = 0;
    bool ok = ft_register("child", &byte, 1) == FT_DISABLED && ft_step_done(1) == FT_DISABLED &&
              ft_update_begin(nullptr) == FT_DISABLED;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace ft::preload::ckpt_test

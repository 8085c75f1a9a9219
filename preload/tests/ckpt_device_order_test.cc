// A copy labelled N holds exactly the state after optimizer N on every byte, or it is torn
// (preload/ckpt/ckpt_agent_cut.cc, step_markers.h). ft_step_done may come while the step's
// work is still queued on the app's stream — a PyTorch loop that never calls .item() — so a
// just-in-time save must find the step on the device, not on the host. A gate (a host function
// that holds the app's stream until opened) plays the device behind its host, or hung.
// CTest preload.ckpt_device_order (FT_CKPT_EVERY=0: no periodic saves in the parent); the
// children run with their own job (their own arena) and settings.
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <cuda_runtime_api.h>
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

constexpr size_t kBytes = 4u << 20;  // 4 chunks of FT_CKPT_CHUNK=1mb

struct Gate {
  std::atomic<bool> open{false};
  static void Fn(void* p) {
    auto* g = static_cast<Gate*>(p);
    while (!g->open.load()) std::this_thread::sleep_for(100us);
  }
};

struct Device {
  void* param = nullptr;
  cudaStream_t stream = nullptr;
};

// Registers one device buffer (and `host`, when given) and ends registration.
Device Register(uint64_t* host = nullptr) {
  Device d;
  EXPECT_EQ(cudaMalloc(&d.param, kBytes), cudaSuccess);
  EXPECT_EQ(cudaMemset(d.param, 0, kBytes), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the legacy stream's memset is not ordered before d.stream
  EXPECT_EQ(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(ft_register("param", d.param, kBytes), FT_OK) << ft_last_error();
  if (host != nullptr) {
    EXPECT_EQ(ft_register("host.step", host, sizeof(*host)), FT_OK) << ft_last_error();
  }
  EXPECT_EQ(ft_register_end(), FT_OK) << ft_last_error();
  return d;
}

Device& TheDevice() {
  static Device d = [] {
    unlink(ArenaPath().c_str());
    return Register();
  }();
  return d;
}

// Step s as a training loop queues it: the update marker, the optimizer (every byte becomes s)
// and ft_step_done, with no synchronization.
void QueueStep(const Device& d, int64_t s) {
  ASSERT_EQ(ft_update_begin(d.stream), FT_OK) << ft_last_error();
  ASSERT_EQ(cudaMemsetAsync(d.param, static_cast<int>(s & 0xff), kBytes, d.stream), cudaSuccess);
  ASSERT_EQ(ft_step_done(s), FT_OK) << ft_last_error();
}

std::string Field(const std::string& message, const std::string& key) {
  size_t at = message.find(key + "=");
  if (at == std::string::npos) return "";
  at += key.size() + 1;
  return message.substr(at, message.find(' ', at) - at);
}

shm::Ack Save(const std::string& tag) {
  auto ack = WaitAck(Post(shm::CommandType::kSave, tag));
  EXPECT_TRUE(ack.has_value());
  return ack.value_or(shm::Ack{});
}

size_t Differing(const Committed& c, uint8_t value) {
  const ckpt::BufferEntry* e = Entry(c.manifest, "param");
  if (e == nullptr) return SIZE_MAX;
  size_t n = 0;
  for (uint64_t i = 0; i < e->bytes; ++i) n += c.data()[e->offset + i] != value;
  return n;
}

// The committed copy is step `step`, whole, holding that step's bytes.
void ExpectCommitted(int64_t step) {
  auto c = ReadArena();
  ASSERT_TRUE(c->status.ok()) << c->status.ToString();
  EXPECT_EQ(c->manifest.step, step);
  EXPECT_FALSE(c->manifest.torn);
  EXPECT_EQ(Differing(*c, static_cast<uint8_t>(step & 0xff)), 0u)
      << "the copy labelled step " << step << " does not hold that step's bytes";
  for (size_t i = 0; i < c->manifest.chunk_count(); ++i) EXPECT_TRUE(ckpt::ChunkVerifies(c->manifest, i, c->data()));
}

void Sync(const Device& d) { ASSERT_EQ(cudaStreamSynchronize(d.stream), cudaSuccess); }

TEST(CkptDeviceOrder, SaveWhileTheStepIsStillQueuedIsOfTheStepTheDeviceHolds) {
  Device& d = TheDevice();
  QueueStep(d, 1);
  Sync(d);
  static Gate gate;  // the host function may read it after an early return
  gate.open.store(false);
  ASSERT_EQ(cudaLaunchHostFunc(d.stream, Gate::Fn, &gate), cudaSuccess);
  QueueStep(d, 2);  // ft_step_done(2) returned; optimizer 2 is queued behind the gate
  shm::Ack ack = Save("queued");
  EXPECT_EQ(ack.result, 0) << ack.message;
  EXPECT_TRUE(StartsWith(ack.message, "saved step=1 ")) << "the device holds step 1: " << ack.message;
  EXPECT_EQ(Field(ack.message, "torn"), "0") << ack.message;
  ExpectCommitted(1);
  gate.open.store(true);
  Sync(d);
  ack = Save("landed");
  EXPECT_TRUE(StartsWith(ack.message, "saved step=2 ")) << ack.message;
  ExpectCommitted(2);
}

// The device stopped inside an update (a collective inside the optimizer that hangs): no step
// is whole there. The copy is torn and the whole copy of the step before stays the one used.
TEST(CkptDeviceOrder, SaveWhileTheDeviceIsInsideAnUpdateIsTorn) {
  Device& d = TheDevice();
  QueueStep(d, 3);
  Sync(d);
  ASSERT_TRUE(StartsWith(Save("whole").message, "saved step=3 "));
  static Gate gate;
  gate.open.store(false);
  ASSERT_EQ(ft_update_begin(d.stream), FT_OK);
  ASSERT_EQ(cudaMemsetAsync(d.param, 4, kBytes / 2, d.stream), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(d.stream, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(static_cast<uint8_t*>(d.param) + kBytes / 2, 4, kBytes / 2, d.stream), cudaSuccess);
  ASSERT_EQ(ft_step_done(4), FT_OK);
  shm::Ack ack = Save("inside");
  EXPECT_EQ(Field(ack.message, "torn"), "1") << "half of step 4's update is on the device: " << ack.message;
  ExpectCommitted(3);
  gate.open.store(true);
  Sync(d);
  ack = Save("after");
  EXPECT_TRUE(StartsWith(ack.message, "saved step=4 ")) << ack.message;
  ExpectCommitted(4);
}

// A host 40 steps ahead of a device that hangs: the copy is of the step the device finished.
TEST(CkptDeviceOrder, HostFarAheadOfAHungDevice) {
  Device& d = TheDevice();
  QueueStep(d, 5);
  Sync(d);
  static Gate gate;
  gate.open.store(false);
  ASSERT_EQ(cudaLaunchHostFunc(d.stream, Gate::Fn, &gate), cudaSuccess);
  for (int64_t s = 6; s < 46; ++s) QueueStep(d, s);
  shm::Ack ack = Save("ahead");
  EXPECT_TRUE(StartsWith(ack.message, "saved step=5 ")) << ack.message;
  EXPECT_EQ(Field(ack.message, "torn"), "0") << ack.message;
  ExpectCommitted(5);
  gate.open.store(true);
  Sync(d);
  ack = Save("caught-up");
  EXPECT_TRUE(StartsWith(ack.message, "saved step=45 ")) << ack.message;
  ExpectCommitted(45);
}

// The children: a registration of their own each.
int Child(const std::string& filter, std::vector<std::string> env) {
  const std::string job = Job() + "-" + filter.substr(filter.find('.') + 1);
  env.push_back("FT_JOB=" + job);
  const std::string path = ckpt::Arena::PathFor(ArenaDir(), job, Rank());
  unlink(path.c_str());
  int rc = RunSelf(filter, env);
  unlink(path.c_str());
  return rc;
}

bool IsChild() { return !Env("FT_TEST_CKPT_CHILD").empty(); }

// A blocking periodic save (FT_CKPT_ASYNC=0) copies at once: ft_step_done first waits for the
// step to end on the device.
TEST(CkptDeviceOrder, BlockingPeriodicSaveWaitsForTheDevice) {
  EXPECT_EQ(Child("CkptDeviceOrderChild.BlockingPeriodicSave", {"FT_CKPT_EVERY=1", "FT_CKPT_ASYNC=0"}), 0);
}

TEST(CkptDeviceOrderChild, BlockingPeriodicSave) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptDeviceOrder";
  Device d = Register();
  static Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(d.stream, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(ft_update_begin(d.stream), FT_OK);
  ASSERT_EQ(cudaMemsetAsync(d.param, 1, kBytes, d.stream), cudaSuccess);
  auto done = std::async(std::launch::async, [] { return ft_step_done(1); });
  std::this_thread::sleep_for(200ms);  // ft_step_done would have copied step 0's bytes by now
  gate.open.store(true);
  ASSERT_EQ(done.get(), FT_OK) << ft_last_error();
  test_util::WaitUntil([] { return ReadArena()->status.ok(); });
  ExpectCommitted(1);
}

// Host and device memory registered together: the host buffer holds the host's step, the device
// its own. A device behind its host makes the copy torn, never a mix labelled as one step.
TEST(CkptDeviceOrder, DeviceBehindItsHostWithHostMemoryIsTorn) {
  EXPECT_EQ(Child("CkptDeviceOrderChild.DeviceBehindItsHost", {"FT_CKPT_EVERY=0"}), 0);
}

TEST(CkptDeviceOrderChild, DeviceBehindItsHost) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptDeviceOrder";
  static uint64_t host_step = 0;
  Device d = Register(&host_step);
  host_step = 1;
  QueueStep(d, 1);
  Sync(d);
  ASSERT_TRUE(StartsWith(Save("whole").message, "saved step=1 "));
  static Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(d.stream, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(ft_update_begin(d.stream), FT_OK);
  host_step = 2;  // the host's part of update 2 (a CPU optimizer, Python state)
  ASSERT_EQ(cudaMemsetAsync(d.param, 2, kBytes, d.stream), cudaSuccess);
  ASSERT_EQ(ft_step_done(2), FT_OK);
  shm::Ack ack = Save("mixed");
  EXPECT_EQ(Field(ack.message, "torn"), "1") << "device at step 1, host at step 2: " << ack.message;
  ExpectCommitted(1);
  gate.open.store(true);
  Sync(d);
  ack = Save("agreed");
  EXPECT_TRUE(StartsWith(ack.message, "saved step=2 ")) << ack.message;
  EXPECT_EQ(Field(ack.message, "torn"), "0") << ack.message;
  ExpectCommitted(2);
}

// After ft_save_on_failure the process is ending: its memory is being freed (a Python
// interpreter tears down its tensors). A save command then must not copy it as that step.
TEST(CkptDeviceOrder, NoSaveAfterTheSaveOnFailure) {
  EXPECT_EQ(Child("CkptDeviceOrderChild.NoSaveAfterTheSaveOnFailure", {"FT_CKPT_EVERY=0"}), 0);
}

TEST(CkptDeviceOrderChild, NoSaveAfterTheSaveOnFailure) {
  if (!IsChild()) GTEST_SKIP() << "run by CkptDeviceOrder";
  static uint64_t host_step = 0;
  Device d = Register(&host_step);
  host_step = 3;
  QueueStep(d, 3);
  Sync(d);
  ASSERT_EQ(ft_save_on_failure(), FT_OK) << ft_last_error();
  ExpectCommitted(3);
  host_step = 0xdead;  // the teardown reuses the memory
  ASSERT_EQ(cudaMemset(d.param, 0xee, kBytes), cudaSuccess);
  shm::Ack ack = Save("after-failure");
  EXPECT_NE(ack.result, 0) << "a save after the process began to end: " << ack.message;
  EXPECT_NE(ack.message.find("ending"), std::string::npos) << ack.message;
  ExpectCommitted(3);
}

}  // namespace
}  // namespace ft::preload::ckpt_test

// Helpers of the checkpoint agent's tests (ckpt_test.cc): the process's own segment and
// mailbox as ftworker sees them, the rank's arena as a reader sees it, device bytes read on a
// stream of their own.
#ifndef FT_PRELOAD_TESTS_CKPT_TEST_UTIL_H_
#define FT_PRELOAD_TESTS_CKPT_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#ifndef FT_WEAK_IMPORT
#define FT_WEAK_IMPORT
#endif
#include "include/ft/ft.h"

#include "common/status.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "jitckpt/node_plan.h"
#include "shm/mailbox.h"
#include "shm/segment.h"
#include "tests/util/wait_until.h"

namespace ft::preload::ckpt_test {

// Tests read their environment directly (CTest sets it); the product reads it via Config.
inline std::string Env(const char* key, const char* fallback = "") {
  const char* v = getenv(key);
  return v != nullptr ? v : fallback;
}
inline std::string Job() { return Env("FT_JOB"); }
inline int Rank() { return atoi(Env("FT_RANK", "0").c_str()); }
inline std::string ArenaDir() { return Env("FT_CKPT_ARENA_DIR", "/dev/shm"); }
inline std::string ArenaPath() { return ckpt::Arena::PathFor(ArenaDir(), Job(), Rank()); }

// The process's segment, attached as ftworker attaches it (libft.so made it at the first
// CUDA call).
inline shm::Segment& Own() {
  static std::unique_ptr<shm::Segment> segment = [] {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, 16), cudaSuccess);  // libft.so creates its segment now
    std::unique_ptr<shm::Segment> s;
    Status st = shm::Segment::Attach(shm::SegmentName(Job(), Rank(), getpid()), &s);
    EXPECT_TRUE(st.ok()) << st.ToString() << " (is LD_PRELOAD=libft.so set?)";
    return s;
  }();
  return *segment;
}

// Posts a command exactly as ftworker does.
inline uint64_t Post(shm::CommandType type, const std::string& text) {
  uint64_t seq = 0;
  Status st = shm::PostCommand(Own(), static_cast<uint32_t>(type),
                               {reinterpret_cast<const uint8_t*>(text.data()), text.size()}, &seq);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return seq;
}

inline std::optional<shm::Ack> WaitAck(uint64_t seq) {
  std::optional<shm::Ack> ack;
  test_util::WaitUntil([&] { return (ack = shm::PollAck(Own(), seq)).has_value(); });
  // The ack reaches this thread through a second mapping of the segment, where ThreadSanitizer
  // cannot pair libft.so's release with our acquire. Any ft_* call passes the agent's lock,
  // which the agent released before acknowledging: a synchronization TSan sees.
  if (ack && ft_available()) (void)ft_version(), (void)ft_set_shard(-1, -1, -1);
  return ack;
}

// The arena's committed copy as a reader (ftworker, a peer) sees it.
struct Committed {
  ckpt::Arena arena;
  ckpt::Manifest manifest;
  uint64_t generation = 0;
  Status status;
  const uint8_t* data() const { return arena.data(generation); }
};

inline std::unique_ptr<Committed> ReadArena() {
  auto c = std::make_unique<Committed>();
  c->status = ckpt::Arena::OpenForRead(ArenaPath(), &c->arena);
  if (c->status.ok()) c->status = c->arena.ReadCommitted(&c->manifest, &c->generation);
  return c;
}

// The plan ftworker would write for this node: `step` of this rank from its own arena.
inline void WritePlan(int64_t step, uint64_t digest, const std::string& settling = "") {
  ckpt::NodePlan plan;
  plan.job = Job();
  plan.node = Env("FT_NODE_ID");
  plan.version = 1;
  plan.step = step;
  plan.settling = settling;
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

// The arena at `path` holds a whole committed copy of `step`: readable (`if_none` says what its
// absence means), not torn, every chunk verified.
inline void ExpectCommittedWhole(const std::string& path, int64_t step, const char* if_none) {
  ckpt::Arena arena;
  ASSERT_TRUE(ckpt::Arena::OpenForRead(path, &arena).ok()) << path;
  ckpt::Manifest m;
  uint64_t generation = 0;
  ASSERT_TRUE(arena.ReadCommitted(&m, &generation).ok()) << if_none;
  EXPECT_EQ(m.step, step);
  EXPECT_FALSE(m.torn);
  for (size_t i = 0; i < m.chunk_count(); ++i) EXPECT_TRUE(ckpt::ChunkVerifies(m, i, arena.data(generation))) << i;
}

// libft.so keeps the segment of a process that failed, for a worker to read how it ended; no
// worker runs in these tests, so a test whose child failed removes the child job's segments.
inline void RemoveKeptSegments(const std::string& job) {
  const std::string prefix = shm::SegmentPrefix(job).substr(1);
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().starts_with(prefix)) unlink(e.path().c_str());
  }
}

// Device bytes, read on a non-blocking stream (the app's may be stuck).
inline std::vector<uint8_t> DeviceBytes(const void* dev, size_t n) {
  std::vector<uint8_t> out(n);
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(out.data(), dev, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  return out;
}

inline void FillDevice(void* dev, size_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 12));
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dev, bytes.data(), n, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Where buffer `name` sits in the manifest's data region.
inline const ckpt::BufferEntry* Entry(const ckpt::Manifest& m, const std::string& name) {
  for (const auto& b : m.buffers) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

inline bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Runs this test binary again (same environment plus `env`, under the same LD_PRELOAD) with
// a gtest filter; returns its exit status (0: its tests passed).
int RunSelf(const std::string& filter, const std::vector<std::string>& env);

}  // namespace ft::preload::ckpt_test

#endif  // FT_PRELOAD_TESTS_CKPT_TEST_UTIL_H_

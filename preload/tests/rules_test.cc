// libft.so under CUDA's and NCCL's rules, in a gpusim program under LD_PRELOAD=libft.so
// (CMakeLists.txt): the poller thread must not change what the app's own calls do.
//  - Stream capture: while the app captures a graph in global mode (torch.cuda.graph's
//    default) the poller keeps observing ops in flight; its calls must not invalidate the
//    capture, and it must never record into a stream being captured.
//  - Abort: NCCL forbids other threads in a communicator being aborted, and its handle is
//    invalid afterwards; gpusim counts such calls (tests/gpusim/nccl/src/violation.h).
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "shm/records.h"
#include "shm/hook_failures.h"
#include "shm/ring.h"
#include "shm/segment.h"

extern "C" uint64_t gpusimNcclViolationCount();
extern "C" const char* gpusimNcclLastViolation();

namespace ft::preload {
namespace {

using shm::RecordType;
using enum shm::RecordFlags;

constexpr char kJob[] = "preload_rules_test";  // FT_JOB, set by CTest

shm::Segment& Own() {
  static std::unique_ptr<shm::Segment> segment = [] {
    std::unique_ptr<shm::Segment> s;
    Status st = shm::Segment::Attach(shm::SegmentName(kJob, -1, getpid()), &s);
    EXPECT_TRUE(st.ok()) << st.ToString() << " (is LD_PRELOAD=libft.so set?)";
    return s;
  }();
  return *segment;
}

const std::vector<shm::Record>& Records() {
  static std::vector<shm::Record> all;
  shm::RingReader reader(Own());
  shm::Record buf[256];
  size_t got = 0;
  do {
    if (!reader.Poll(buf, 256, &got).ok()) break;
    all.insert(all.end(), buf, buf + got);
  } while (got == 256);
  return all;
}

bool Is(const shm::Record& r, RecordType t) { return r.type == static_cast<uint16_t>(t); }

ncclComm_t NewComm(bool blocking) {
  ncclUniqueId uid;
  EXPECT_EQ(ncclGetUniqueId(&uid), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, uid, 0, &config);
  EXPECT_TRUE(r == ncclSuccess || r == ncclInProgress) << r;
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);
  return comm;
}

// Waits (up to 10 s) until the poller has gone through `rounds` more rounds.
void WaitPollerRounds(uint64_t rounds) {
  auto& beats = Own().header()->heartbeat_count;
  uint64_t target = beats.load() + rounds;
  for (int i = 0; i < 10000 && beats.load() < target; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(beats.load(), target) << "the poller stopped";
}

// Records reach the ring through the poller (an app thread's queue is moved once per round):
// two full rounds after the call, its kCommInit is there.
uint64_t LastCommId() {
  WaitPollerRounds(2);
  for (auto it = Records().rbegin(); it != Records().rend(); ++it) {
    if (Is(*it, RecordType::kCommInit)) return it->comm_id;
  }
  return 0;
}

// The kOpEnd records of a comm, waited for (up to 10 s) until there are n.
std::vector<shm::Record> WaitOpEnds(uint64_t comm_id, size_t n) {
  std::vector<shm::Record> ends;
  for (int i = 0; i < 1000; ++i) {
    ends.clear();
    for (const auto& r : Records()) {
      if (r.comm_id == comm_id && Is(r, RecordType::kOpEnd)) ends.push_back(r);
    }
    if (ends.size() >= n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ends;
}

void HoldStream(void* arg) {
  auto* release = static_cast<std::atomic<bool>*>(arg);
  while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// The app captures in global mode on one stream while a collective on another stream is in
// flight (its stream held by a host function), so the poller queries that op's events every
// round of the capture. The capture must end intact and its graph replay correctly.
TEST(Rules, GlobalModeCaptureSurvivesThePollerWatchingOpsInFlight) {
  ncclComm_t comm = NewComm(/*blocking=*/true);
  const uint64_t comm_id = LastCommId();
  cudaStream_t work, cap;
  ASSERT_EQ(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking), cudaSuccess);
  constexpr size_t kN = 256;
  float *busy, *src, *dst;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&busy), kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&src), kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dst), kN * sizeof(float)), cudaSuccess);
  std::vector<float> host(kN);
  for (size_t i = 0; i < kN; ++i) host[i] = static_cast<float>(i) * 0.5f;
  ASSERT_EQ(cudaMemcpy(src, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dst, 0, kN * sizeof(float)), cudaSuccess);

  std::atomic<bool> release{false};
  ASSERT_EQ(cudaLaunchHostFunc(work, HoldStream, &release), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(busy, busy, kN, ncclFloat32, ncclSum, comm, work), ncclSuccess);
  WaitPollerRounds(3);  // the op is on the poller's list

  ASSERT_EQ(cudaStreamBeginCapture(cap, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(src, dst, kN, ncclFloat32, ncclSum, comm, cap), ncclSuccess);
  WaitPollerRounds(20);  // the poller queries the held op's events all along
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(cap, &graph), cudaSuccess);
  release.store(true);
  ASSERT_EQ(cudaStreamSynchronize(work), cudaSuccess);

  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  std::vector<float> out(kN, -1.0f);
  ASSERT_EQ(cudaMemcpy(out.data(), dst, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out[1], 0.0f) << "captured work must not have run";
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_EQ(cudaMemsetAsync(dst, 0, kN * sizeof(float), cap), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, cap), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cap), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(out.data(), dst, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(out, host) << "replay " << launch;
  }
  auto ends = WaitOpEnds(comm_id, 1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_FALSE(ends[0].flags & (kFlagError | kFlagUntimed)) << ends[0].flags;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  for (float* p : {busy, src, dst}) EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A nonblocking collective's end event is recorded by the poller once NCCL says the op is no
// longer in progress. If the app begins a capture on that stream in between (it saw the op
// leave ncclInProgress first), the record must wait for the capture to end, not join the graph.
TEST(Rules, LateEndIsNeverRecordedIntoACapturingStream) {
  setenv("GPUSIM_NCCL_LAUNCH_DELAY_MS", "300", 1);  // read at creation: this comm only
  ncclComm_t comm = NewComm(/*blocking=*/false);
  unsetenv("GPUSIM_NCCL_LAUNCH_DELAY_MS");
  const uint64_t comm_id = LastCommId();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* buf;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, comm, s), ncclInProgress);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  ASSERT_EQ(state, ncclSuccess);
  // Right away: the poller (polling at 16x its interval after 300 ms without progress) has
  // almost surely not seen the op leave ncclInProgress yet.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buf, 0, 64 * sizeof(float), s), cudaSuccess);
  WaitPollerRounds(5);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 1u) << "only the app's memset belongs to its graph";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto ends = WaitOpEnds(comm_id, 1);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_FALSE(ends[0].flags & (kFlagError | kFlagUntimed)) << ends[0].flags;
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The app aborts a nonblocking communicator whose collective is still ncclInProgress (the
// poller polls ncclCommGetAsyncError on it every round). Abort takes 200 ms, as a real
// teardown can: the poller must stay out of the communicator from the moment the abort
// begins, and never touch the handle afterwards.
TEST(Rules, ThePollerStaysOutOfACommunicatorBeingAborted) {
  setenv("GPUSIM_NCCL_LAUNCH_DELAY_MS", "20000", 1);
  setenv("GPUSIM_NCCL_TEARDOWN_MS", "200", 1);
  ncclComm_t comm = NewComm(/*blocking=*/false);
  unsetenv("GPUSIM_NCCL_LAUNCH_DELAY_MS");
  unsetenv("GPUSIM_NCCL_TEARDOWN_MS");
  const uint64_t comm_id = LastCommId();
  const uint64_t violations = gpusimNcclViolationCount();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* buf;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, comm, s), ncclInProgress);
  WaitPollerRounds(3);  // polling ncclCommGetAsyncError
  ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  WaitOpEnds(comm_id, 1);
  WaitPollerRounds(5);
  EXPECT_EQ(gpusimNcclViolationCount(), violations) << gpusimNcclLastViolation();
  bool ended = false;
  for (const auto& r : Records()) ended |= Is(r, RecordType::kCommEnd) && r.comm_id == comm_id && r.a == 2;
  EXPECT_TRUE(ended);
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
}

// Run with FT_TEST_FAIL_HOOK=nccl_pre_op (CMakeLists.txt, preload.hook_failure): every
// collective's pre-hook throws inside libft.so. The app's calls return and compute exactly as
// without libft.so, and the swallowed failures are counted where ftdump shows them.
TEST(HookFailure, AFailingHookLeavesTheAppsResultsAndIsCountedForFtdump) {
  const char* injected = std::getenv("FT_TEST_FAIL_HOOK");
  if (injected == nullptr || std::string(injected) != "nccl_pre_op") GTEST_SKIP() << "needs FT_TEST_FAIL_HOOK=nccl_pre_op";
  ncclComm_t comm = NewComm(/*blocking=*/true);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  constexpr size_t kN = 128;
  float *src, *dst;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&src), kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dst), kN * sizeof(float)), cudaSuccess);
  std::vector<float> host(kN), out(kN, 0.0f);
  for (size_t i = 0; i < kN; ++i) host[i] = 1.0f + static_cast<float>(i);
  ASSERT_EQ(cudaMemcpy(src, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  constexpr int kOps = 3;
  for (int i = 0; i < kOps; ++i) {
    ASSERT_EQ(ncclAllReduce(src, dst, kN, ncclFloat32, ncclSum, comm, s), ncclSuccess);
  }
  EXPECT_EQ(ncclAllReduce(src, dst, kN, ncclNumTypes, ncclSum, comm, s), ncclInvalidArgument)
      << "the real error still comes back";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), dst, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, host);

  uint64_t counted = 0;
  for (const auto& f : shm::SnapshotHookFailures(Own().header())) {
    if (f.place == static_cast<uint32_t>(shm::HookPlace::kNcclPreOp)) counted = f.count;
  }
  EXPECT_EQ(counted, kOps + 1u);
  std::string command = std::string(FT_FTDUMP) + " " + Own().name();
  FILE* f = popen(command.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string text;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) text += line;
  EXPECT_EQ(pclose(f), 0) << text;
  EXPECT_NE(text.find("hook failures: nccl_pre_op x" + std::to_string(kOps + 1)), std::string::npos) << text;
  EXPECT_EQ(cudaFree(src), cudaSuccess);
  EXPECT_EQ(cudaFree(dst), cudaSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace ft::preload

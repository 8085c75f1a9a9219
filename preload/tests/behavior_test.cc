// libft.so inside a real (gpusim) CUDA + NCCL program: this binary links the gpusim runtime
// and NCCL and runs with LD_PRELOAD=libft.so (see CMakeLists.txt), reading its own segment.
// Single-rank communicators keep it one process; the multi-rank behaviour is the e2e tests'.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "shm/comm_table.h"
#include "shm/mailbox.h"
#include "shm/records.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "tests/util/thread_named.h"
#include "tests/util/wait_until.h"

namespace ft::preload {
namespace {

using shm::ApiLibrary;
using shm::CommOrigin;
using shm::OpKind;
using shm::P2PSlotId;
using shm::RecordType;
using enum shm::RecordFlags;

constexpr char kJob[] = "preload_behavior_test";  // FT_JOB, set by CTest

shm::Segment& Own() {
  static std::unique_ptr<shm::Segment> segment = [] {
    std::unique_ptr<shm::Segment> s;
    Status st = shm::Segment::Attach(shm::SegmentName(kJob, -1, getpid()), &s);
    EXPECT_TRUE(st.ok()) << st.ToString() << " (is LD_PRELOAD=libft.so set?)";
    return s;
  }();
  return *segment;
}

// Waits until the poller has begun `rounds` more rounds (it advances the heartbeat at the
// start of each), so at least rounds - 1 whole rounds ran since the call: "the poller had
// every chance to see it", on a machine of any load, where a fixed sleep can pass unseen.
bool WaitPollRounds(uint64_t rounds) {
  const uint64_t target = Own().header()->heartbeat_count.load() + rounds;
  return test_util::WaitUntil([&] { return Own().header()->heartbeat_count.load() >= target; });
}

// Every record so far (consumed from the ring and kept). App threads' records reach the ring
// at the poller's next round (record_queue.h): two rounds make sure this thread's are there.
const std::vector<shm::Record>& Records() {
  static std::vector<shm::Record> all;
  EXPECT_TRUE(WaitPollRounds(2)) << "the poller stopped";
  shm::RingReader reader(Own());
  shm::Record buf[256];
  size_t got = 0;
  do {
    if (!reader.Poll(buf, 256, &got).ok()) {
      ADD_FAILURE() << "ring corrupt";
      break;
    }
    all.insert(all.end(), buf, buf + got);
  } while (got == 256);
  return all;
}

bool Is(const shm::Record& r, RecordType t) { return r.type == static_cast<uint16_t>(t); }

struct Comm {
  ncclComm_t comm = nullptr;
  uint64_t id = 0;
};

// A one-rank communicator and the id libft.so gave it.
Comm NewComm(bool blocking = true) {
  ncclUniqueId uid;
  EXPECT_EQ(ncclGetUniqueId(&uid), ncclSuccess);
  Comm c;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  ncclResult_t r = ncclCommInitRankConfig(&c.comm, 1, uid, 0, &config);
  EXPECT_TRUE(r == ncclSuccess || (!blocking && r == ncclInProgress)) << r;
  for (auto it = Records().rbegin(); it != Records().rend(); ++it) {
    if (Is(*it, RecordType::kCommInit)) {
      c.id = it->comm_id;
      break;
    }
  }
  return c;
}

void WaitReady(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 5000 && state == ncclInProgress; ++i) {
    ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    if (state == ncclInProgress) usleep(1000);
  }
  ASSERT_EQ(state, ncclSuccess);
}

std::optional<shm::CommProgress> Slot(uint64_t comm_id) {
  for (uint32_t i = 0; i < Own().header()->comm_slot_count; ++i) {
    auto p = shm::SnapshotCommSlot(Own(), i);
    if (p && p->comm_id == comm_id) return p;
  }
  return std::nullopt;
}

// Waits for the poller to see `n` ops of the comm completed; the comm's progress then.
shm::CommProgress WaitCompleted(uint64_t comm_id, uint64_t n) {
  std::optional<shm::CommProgress> p;
  test_util::WaitUntil([&] {
    p = Slot(comm_id);
    return p && p->completed_seq >= n;
  });
  EXPECT_TRUE(p.has_value());
  return p.value_or(shm::CommProgress{});
}

std::vector<shm::Record> OfComm(uint64_t comm_id, RecordType type) {
  std::vector<shm::Record> out;
  for (const auto& r : Records()) {
    if (r.comm_id == comm_id && Is(r, type)) out.push_back(r);
  }
  return out;
}

// What most tests start from: a one-rank communicator, a stream (with `stream_flags`) and a
// device buffer of `floats` floats, each checked as it is made (ok() says all were). Freed and
// destroyed, and checked, when it goes out of scope.
struct CommOnStream {
  explicit CommOnStream(size_t floats, unsigned int stream_flags = cudaStreamDefault, bool blocking = true)
      : c(NewComm(blocking)) {
    if (!blocking) WaitReady(c.comm);
    EXPECT_EQ(stream_flags == cudaStreamDefault ? cudaStreamCreate(&s) : cudaStreamCreateWithFlags(&s, stream_flags),
              cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), floats * sizeof(float)), cudaSuccess);
  }
  ~CommOnStream() {
    EXPECT_EQ(cudaFree(buf), cudaSuccess);
    EXPECT_EQ(ncclCommDestroy(c.comm), ncclSuccess);
  }
  CommOnStream(const CommOnStream&) = delete;
  CommOnStream& operator=(const CommOnStream&) = delete;
  bool ok() const { return c.comm != nullptr && s != nullptr && buf != nullptr; }

  // One all-reduce of `count` floats of the buffer on the stream.
  ncclResult_t AllReduce(size_t count = 64) { return ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, c.comm, s); }

  Comm c;
  cudaStream_t s = nullptr;
  float* buf = nullptr;
};

// A stuck kernel: a host function that holds the stream it is queued on until Release().
class StreamHold {
 public:
  cudaError_t On(cudaStream_t s) { return cudaLaunchHostFunc(s, &Hold, &release_); }
  void Release() { release_.store(true); }

 private:
  static void Hold(void* arg) {
    auto* flag = static_cast<std::atomic<bool>*>(arg);
    while (!flag->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::atomic<bool> release_{false};
};

// Two ranks of one communicator in this process (ncclCommInitAll over devices 0 and 1), the id
// libft.so gave it (the newest kInitAll communicator), and a stream and a 64-float buffer on each
// device. Device 1 is current afterwards.
struct InitAllPair {
  ncclComm_t comms[2] = {nullptr, nullptr};
  uint64_t id = 0;
  cudaStream_t s[2] = {nullptr, nullptr};
  float* buf[2] = {nullptr, nullptr};
};
void NewInitAllPair(InitAllPair* p) {
  ASSERT_EQ(ncclCommInitAll(p->comms, 2, nullptr), ncclSuccess);
  for (const auto& r : Records()) {
    if (Is(r, RecordType::kCommInit) && r.flags == static_cast<uint16_t>(CommOrigin::kInitAll)) p->id = r.comm_id;
  }
  ASSERT_NE(p->id, 0u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cudaSetDevice(i), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&p->s[i]), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p->buf[i]), 64 * sizeof(float)), cudaSuccess);
  }
}

TEST(Behavior, CollectivesAreNumberedTimedAndCompleted) {
  Comm c = NewComm();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  float* buf;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), 1024 * sizeof(float)), cudaSuccess);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, c.comm, s), ncclSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto p = WaitCompleted(c.id, 3);
  EXPECT_EQ(p.entered_seq, 3u);
  EXPECT_EQ(p.started_seq, 3u);
  EXPECT_EQ(p.completed_seq, 3u);
  EXPECT_EQ(p.enter_op, static_cast<uint32_t>(OpKind::kAllReduce));
  EXPECT_EQ(p.entered_bytes, 4096u);
  auto enters = OfComm(c.id, RecordType::kOpEnter);
  ASSERT_EQ(enters.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(enters[i].seq, i + 1);
    EXPECT_EQ(enters[i].b, 4096u);
    EXPECT_EQ(enters[i].c, reinterpret_cast<uintptr_t>(s));
  }
  EXPECT_EQ(OfComm(c.id, RecordType::kOpStart).size(), 3u);
  EXPECT_EQ(OfComm(c.id, RecordType::kOpEnd).size(), 3u);
  ASSERT_EQ(cudaFree(buf), cudaSuccess);
  bool alloc = false, freed = false;
  for (const auto& r : Records()) {
    if (Is(r, RecordType::kAlloc) && r.b == reinterpret_cast<uintptr_t>(buf)) {
      (r.flags & 1 ? freed : alloc) = true;
      if (!(r.flags & 1)) {
        EXPECT_EQ(r.a, 4096u);
      }
    }
  }
  EXPECT_TRUE(alloc && freed);
  EXPECT_EQ(ncclCommDestroy(c.comm), ncclSuccess);
  EXPECT_EQ(OfComm(c.id, RecordType::kCommEnd).size(), 1u);
}

TEST(Behavior, GroupedOpsAreTimedAroundTheOutermostGroupEnd) {
  CommOnStream cs(64);
  ASSERT_TRUE(cs.ok());
  auto& [c, s, buf] = cs;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, c.comm, s), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);  // inner: nothing issued yet
  ASSERT_EQ(ncclBroadcast(buf, buf, 64, ncclFloat32, 0, c.comm, s), ncclSuccess);
  EXPECT_EQ(OfComm(c.id, RecordType::kOpEnter).size(), 2u);
  EXPECT_EQ(Slot(c.id)->entered_seq, 2u);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto p = WaitCompleted(c.id, 2);
  EXPECT_EQ(p.completed_seq, 2u);
  auto ends = OfComm(c.id, RecordType::kOpEnd);
  ASSERT_EQ(ends.size(), 2u);
  for (const auto& r : ends) EXPECT_TRUE(r.flags & kFlagGrouped);
  // Both ops share the group's events: same observed completion.
  EXPECT_EQ(ends[0].time_ns, ends[1].time_ns);
}

// Send/Recv use the comm's second table slot, flagged p2p, numbered by this rank's p2p ops.
TEST(Behavior, PointToPointOpsUseTheFlaggedP2PSlot) {
  CommOnStream cs(128);
  ASSERT_TRUE(cs.ok());
  auto& [c, s, buf] = cs;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(buf, 64, ncclFloat32, 0, c.comm, s), ncclSuccess);
  ASSERT_EQ(ncclRecv(buf + 64, 64, ncclFloat32, 0, c.comm, s), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto p = WaitCompleted(P2PSlotId(c.id), 2);
  EXPECT_EQ(p.flags, shm::kCommSlotP2P);
  EXPECT_EQ(p.entered_seq, 2u);
  EXPECT_EQ(p.completed_seq, 2u);
  EXPECT_EQ(p.enter_op, static_cast<uint32_t>(OpKind::kRecv));
  auto coll = Slot(c.id);
  ASSERT_TRUE(coll.has_value());
  EXPECT_EQ(coll->flags, 0u);
  EXPECT_EQ(coll->entered_seq, 0u);
}

TEST(Behavior, NonblockingCommunicatorInProgressIsTracked) {
  CommOnStream cs(64, cudaStreamDefault, /*blocking=*/false);  // ready before its stream is made
  ASSERT_TRUE(cs.ok());
  auto& [c, s, buf] = cs;
  ncclResult_t r = cs.AllReduce();
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << r;
  WaitReady(c.comm);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, c.comm, s), ncclSuccess);
  r = ncclGroupEnd();
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << r;
  WaitReady(c.comm);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto p = WaitCompleted(c.id, 2);
  EXPECT_EQ(p.started_seq, 2u);
  EXPECT_EQ(p.completed_seq, 2u);
  for (const auto& e : OfComm(c.id, RecordType::kOpEnd)) {
    EXPECT_FALSE(e.flags & (kFlagError | kFlagUntimed)) << e.flags;
  }
  // A nonblocking split: rank and size are unknown when it returns; its slot is claimed with
  // them at its first op.
  ncclComm_t child = nullptr;
  r = ncclCommSplit(c.comm, 0, 0, &child, nullptr);
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << r;
  WaitReady(child);
  uint64_t child_id = 0;
  for (const auto& rec : Records()) {
    if (Is(rec, RecordType::kCommInit) && rec.c == c.id) child_id = rec.comm_id;
  }
  ASSERT_NE(child_id, 0u);
  r = ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, child, s);
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << r;
  WaitReady(child);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto cp = WaitCompleted(child_id, 1);
  EXPECT_EQ(cp.comm_rank, 0);
  EXPECT_EQ(cp.comm_size, 1);
  EXPECT_EQ(cp.completed_seq, 1u);
  EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
}

TEST(Behavior, CapturedCollectiveIsNotNumberedAndTheGraphLaunchIsTimed) {
  CommOnStream cs(64, cudaStreamNonBlocking);
  ASSERT_TRUE(cs.ok());
  auto& [c, s, buf] = cs;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cs.AllReduce(), ncclSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);  // capture intact: no event went in
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  size_t before = 0;
  for (const auto& r : Records()) before += Is(r, RecordType::kOpEnd) && (r.a & 0xff) == 20;
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  auto enters = OfComm(c.id, RecordType::kOpEnter);
  ASSERT_EQ(enters.size(), 1u);
  EXPECT_TRUE(enters[0].flags & kFlagCaptured);
  EXPECT_EQ(enters[0].seq, 0u);
  EXPECT_EQ(Slot(c.id)->entered_seq, 0u);
  size_t graphs = 0;
  test_util::WaitUntil([&] {
    graphs = 0;
    for (const auto& r : Records()) graphs += Is(r, RecordType::kOpEnd) && (r.a & 0xff) == 20;
    return graphs >= before + 2;
  });
  EXPECT_EQ(graphs, before + 2);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST(Behavior, ErrorsPassThroughUnchangedAndAreRecorded) {
  Comm c = NewComm();
  (void)cudaGetLastError();
  float* buf;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), 64 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(ncclAllReduce(buf, buf, 64, ncclNumTypes, ncclSum, c.comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(cudaFree(reinterpret_cast<void*>(0x10)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);  // the app's own error, not ours
  bool nccl_error = false, cuda_error = false;
  for (const auto& r : Records()) {
    if (!Is(r, RecordType::kApiError)) continue;
    // The symbol by its stable id (a hash of its name), never by a position in a .def list.
    nccl_error |= r.a == static_cast<uint64_t>(ApiLibrary::kNccl) && r.c == ncclInvalidArgument &&
                  r.b == shm::ApiSymbolId("ncclAllReduce");
    cuda_error |= r.a == static_cast<uint64_t>(ApiLibrary::kCudart) &&
                  r.c == cudaErrorInvalidValue && r.b == shm::ApiSymbolId("cudaFree");
  }
  EXPECT_TRUE(nccl_error);
  EXPECT_TRUE(cuda_error);
  // A failed op does not stay "in flight".
  auto p = WaitCompleted(c.id, 1);
  EXPECT_EQ(p.completed_seq, p.entered_seq);
  // Our own CUDA calls (capture check, events) leave the app's last error alone.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, c.comm, s), ncclSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
  EXPECT_EQ(ncclCommDestroy(c.comm), ncclSuccess);
}

TEST(Behavior, ThreadsEachDrivingACommunicator) {
  constexpr int kThreads = 4, kOps = 200;
  std::vector<Comm> comms;
  for (int i = 0; i < kThreads; ++i) comms.push_back(NewComm());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cudaStream_t s;
      ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
      float* buf;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buf), 16 * sizeof(float)), cudaSuccess);
      for (int i = 0; i < kOps; ++i) {
        ASSERT_EQ(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comms[t].comm, s), ncclSuccess);
      }
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      ASSERT_EQ(cudaFree(buf), cudaSuccess);
    });
  }
  for (auto& t : threads) t.join();
  for (const Comm& c : comms) {
    auto p = WaitCompleted(c.id, kOps);
    EXPECT_EQ(p.entered_seq, static_cast<uint64_t>(kOps));
    EXPECT_EQ(p.completed_seq, static_cast<uint64_t>(kOps));
    auto enters = OfComm(c.id, RecordType::kOpEnter);
    ASSERT_EQ(enters.size(), static_cast<size_t>(kOps));
    for (int i = 0; i < kOps; ++i) EXPECT_EQ(enters[i].seq, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(ncclCommDestroy(c.comm), ncclSuccess);
  }
  EXPECT_EQ(Own().header()->ring_dropped.load(), 0u);
}

TEST(Behavior, InitAllAndAGroupSpanningTwoCommunicators) {
  InitAllPair pair;
  ASSERT_NO_FATAL_FAILURE(NewInitAllPair(&pair));
  auto& [comms, id, s, buf] = pair;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(ncclAllReduce(buf[i], buf[i], 64, ncclFloat32, ncclSum, comms[i], s[i]), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 1) << "libft.so left another device current";
  for (int i = 0; i < 2; ++i) ASSERT_EQ(cudaStreamSynchronize(s[i]), cudaSuccess);
  auto p = WaitCompleted(id, 1);  // member 0 owns the slot
  EXPECT_EQ(p.completed_seq, 1u);
  size_t ends = 0;
  test_util::WaitUntil([&] { return (ends = OfComm(id, RecordType::kOpEnd).size()) >= 2; });
  EXPECT_EQ(ends, 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(cudaFree(buf[i]), cudaSuccess);
    EXPECT_EQ(ncclCommDestroy(comms[i]), ncclSuccess);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// A stream held by a long "kernel" (a host function that runs until released): threads in
// cudaStreamSynchronize / cudaDeviceSynchronize behind it show in the header as blocked since
// the first one entered; when the last one leaves, the field is 0 again.
TEST(Behavior, BlockedSinceIsSetWhileAThreadWaitsInASynchronizingCall) {
  shm::SegmentHeader* h = Own().header();
  EXPECT_EQ(h->blocked_since_ns.load(), 0u);
  EXPECT_EQ(h->blocked_count.load(), 0u);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  StreamHold long_kernel;
  ASSERT_EQ(long_kernel.On(s), cudaSuccess);
  uint64_t before = MonotonicNs();
  std::thread first([&] { EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess); });
  uint64_t since = 0;
  test_util::WaitUntil([&] { return (since = h->blocked_since_ns.load()) != 0; });
  EXPECT_GE(since, before);
  EXPECT_LE(since, MonotonicNs());
  EXPECT_EQ(h->blocked_count.load(), 1u);
  // A second thread joining keeps the first one's time.
  std::thread second([&] { EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess); });
  test_util::WaitUntil([&] { return h->blocked_count.load() >= 2; });
  EXPECT_EQ(h->blocked_count.load(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(h->blocked_since_ns.load(), since) << "still blocked: the time must not move";
  long_kernel.Release();
  first.join();
  second.join();
  EXPECT_EQ(h->blocked_count.load(), 0u);
  EXPECT_EQ(h->blocked_since_ns.load(), 0u);
  // Calls that do not block leave it alone.
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(h->blocked_since_ns.load(), 0u);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// What "started" means for hang attribution: a collective queued behind a stuck kernel on its
// stream is entered but not started; one whose stream reached it and that waits for a peer is
// started but not completed.
TEST(Behavior, StartedMeansTheStreamReachedTheOp) {
  CommOnStream cs(64);
  ASSERT_TRUE(cs.ok());
  auto& [c, s, buf] = cs;
  ASSERT_EQ(cs.AllReduce(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  WaitCompleted(c.id, 1);
  StreamHold stuck_kernel;
  ASSERT_EQ(stuck_kernel.On(s), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cs.AllReduce(), ncclSuccess);
  ASSERT_TRUE(WaitPollRounds(3)) << "the poller stopped";
  auto p = Slot(c.id);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->entered_seq, 4u);
  EXPECT_EQ(p->started_seq, 1u) << "queued behind the stuck kernel: not started";
  EXPECT_EQ(p->completed_seq, 1u);
  stuck_kernel.Release();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  p = WaitCompleted(c.id, 4);
  EXPECT_EQ(p->started_seq, 4u);
  EXPECT_EQ(p->completed_seq, 4u);

  // Two ranks in this process (devices 0 and 1); rank 0 enters alone and waits for rank 1.
  InitAllPair two;
  ASSERT_NO_FATAL_FAILURE(NewInitAllPair(&two));
  auto& [pair, pair_id, ps, pbuf] = two;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(pbuf[0], pbuf[0], 64, ncclFloat32, ncclSum, pair[0], ps[0]), ncclSuccess);
  std::optional<shm::CommProgress> q;
  test_util::WaitUntil([&] {
    q = Slot(pair_id);
    return q && q->started_seq >= 1;
  });
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->entered_seq, 1u);
  EXPECT_EQ(q->started_seq, 1u) << "rank 0's stream reached the collective";
  ASSERT_TRUE(WaitPollRounds(3)) << "the poller stopped";
  EXPECT_EQ(Slot(pair_id)->completed_seq, 0u) << "it waits for rank 1";
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(pbuf[1], pbuf[1], 64, ncclFloat32, ncclSum, pair[1], ps[1]), ncclSuccess);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(cudaStreamSynchronize(ps[i]), cudaSuccess);
  EXPECT_EQ(WaitCompleted(pair_id, 1).completed_seq, 1u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cudaSetDevice(i), cudaSuccess);
    EXPECT_EQ(cudaFree(pbuf[i]), cudaSuccess);
    EXPECT_EQ(ncclCommDestroy(pair[i]), ncclSuccess);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// Far more ops in flight than libft.so has events for (a benchmark queueing collectives before
// it synchronizes), on a stream that is stuck: none of them may read as completed, or a hang
// hides; once the stream moves, the lane's tail event vouches for the untimed ones.
TEST(Behavior, QueuedOpsBeyondTheEventPoolAreNeverCompletedWithoutEvidence) {
  CommOnStream cs(64);
  ASSERT_TRUE(cs.ok());
  auto& [c, s, buf] = cs;
  ASSERT_EQ(cs.AllReduce(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  WaitCompleted(c.id, 1);
  StreamHold stuck_kernel;
  ASSERT_EQ(stuck_kernel.On(s), cudaSuccess);
  constexpr uint64_t kQueued = 10000;
  for (uint64_t i = 0; i < kQueued; ++i) ASSERT_EQ(cs.AllReduce(), ncclSuccess);
  ASSERT_TRUE(WaitPollRounds(20)) << "the poller stopped";
  auto p = Slot(c.id);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->entered_seq, 1 + kQueued);
  EXPECT_EQ(p->completed_seq, 1u) << "the stream is stuck before op 2: nothing after it completed";
  EXPECT_EQ(p->started_seq, 1u);
  EXPECT_EQ(p->pending_seq, 2u) << "the oldest pending op is the first behind the stuck kernel";
  EXPECT_GT(p->pending_ns, 0u);
  EXPECT_LE(p->pending_ns, p->entered_ns);
  size_t reported_complete = 0;
  for (const auto& r : OfComm(c.id, RecordType::kOpEnd)) reported_complete += r.seq > 1 ? 1 : 0;
  EXPECT_EQ(reported_complete, 0u) << "ops behind the stuck stream reported complete";
  stuck_kernel.Release();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  p = WaitCompleted(c.id, 1 + kQueued);
  EXPECT_EQ(p->completed_seq, 1 + kQueued) << "the tail event vouches for the untimed ops";
  EXPECT_EQ(p->started_seq, 1 + kQueued);
  test_util::WaitUntil([&] { return Slot(c.id)->pending_seq == 0; });
  EXPECT_EQ(Slot(c.id)->pending_seq, 0u) << "nothing pending";
}

// A deep queue in which the event pool ran out twice: timed ops, a gap of untimed ones (gap 1),
// timed ops again once some completed, a second gap. The stream is stuck inside gap 1 when the
// timed op before gap 1 completes: the table must show gap 1's first op started (the stream is
// in it), not started == completed with nothing in flight — which is how a survivor stuck
// behind a dead or frozen peer deep in a 100,000-op queue looked like a finished rank. The
// lane's own note of a gap's first op belongs to its newest gap (gap 2 here); the timed op
// that closed gap 1 carries gap 1's.
TEST(Behavior, AStreamStuckInsideAnOlderGapShowsAnOpInFlight) {
  constexpr uint64_t kPool = 4096;  // preload/timing.h kMaxPending: timed ops in flight
  CommOnStream cs(64);
  ASSERT_TRUE(cs.ok());
  auto& [c, s, buf] = cs;
  ASSERT_EQ(cs.AllReduce(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  WaitCompleted(c.id, 1);
  StreamHold hold0, hold_mid, hold1;
  uint64_t seq = 1;
  auto enqueue = [&](uint64_t n) {
    for (uint64_t i = 0; i < n; ++i, ++seq) ASSERT_EQ(cs.AllReduce(), ncclSuccess);
  };
  ASSERT_EQ(hold0.On(s), cudaSuccess);
  enqueue(kPool / 2);  // timed
  ASSERT_EQ(hold_mid.On(s), cudaSuccess);
  enqueue(kPool / 2);  // timed: the pool is used up
  const uint64_t before_gap1 = seq;
  enqueue(5);  // gap 1
  ASSERT_EQ(hold1.On(s), cudaSuccess);
  enqueue(5);  // gap 1, behind the third stuck function
  // The first half completes: timed ops can be had again. Then timed ops (the first closes gap
  // 1) until the pool is used up again, and gap 2.
  hold0.Release();
  WaitCompleted(c.id, 1 + kPool / 2);
  ASSERT_TRUE(WaitPollRounds(3)) << "the poller stopped";
  enqueue(kPool / 2 + 10);
  // The stream runs up to the third stuck function, inside gap 1.
  hold_mid.Release();
  WaitCompleted(c.id, before_gap1);
  ASSERT_TRUE(WaitPollRounds(5)) << "the poller stopped";
  auto p = Slot(c.id);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->entered_seq, seq);
  EXPECT_EQ(p->completed_seq, before_gap1) << "nothing in gap 1 has evidence of completion";
  EXPECT_EQ(p->started_seq, before_gap1 + 1) << "the stream is inside gap 1: its first op started";
  EXPECT_EQ(p->pending_seq, before_gap1 + 1);
  hold1.Release();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  p = WaitCompleted(c.id, seq);
  EXPECT_EQ(p->completed_seq, seq);
  EXPECT_EQ(p->started_seq, seq);
  (void)Records();  // empties the ring, which later tests read their records from
}

std::atomic<bool> g_hold_poller{false};

// Runs on the poller thread: it stays here, wherever the signal caught it, until released.
void HoldPoller(int) {
  while (g_hold_poller.load()) {
    struct timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

uint64_t ResidentBytes() {
  long pages = 0, resident = 0;
  if (FILE* f = fopen("/proc/self/statm", "r")) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// DESIGN: nothing in the training process waits on libft.so's poller. With the poller held
// still (a stalled thread: preempted, stopped in a debugger, stuck in a driver call), an app
// thread's hooks complete; what cannot be handed over is dropped and counted, and memory stays
// bounded (no record, op or event piles up without limit); once the poller runs again it
// catches up from the table's evidence.
TEST(Behavior, AppThreadsNeverWaitForAStalledPollerAndMemoryStaysBounded) {
  CommOnStream cs(64);
  ASSERT_TRUE(cs.ok());
  auto& [c, s, buf] = cs;
  pid_t poller = test_util::ThreadNamed("ft-poller");
  ASSERT_GT(poller, 0) << "no thread named ft-poller";
  struct sigaction action {};
  action.sa_handler = HoldPoller;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &action, nullptr), 0);
  g_hold_poller.store(true);
  ASSERT_EQ(syscall(SYS_tgkill, getpid(), poller, SIGUSR2), 0);
  // Held once its heartbeat stops moving.
  uint64_t beat = Own().header()->heartbeat_count.load();
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    uint64_t now = Own().header()->heartbeat_count.load();
    if (now == beat) break;
    beat = now;
  }
  uint64_t dropped_before = Own().header()->ring_dropped.load();
  uint64_t resident_before = ResidentBytes();
  constexpr uint64_t kOps = 100000;
  std::atomic<bool> done{false};
  std::thread app([&] {
    for (uint64_t i = 0; i < kOps; ++i) {
      if (cs.AllReduce() != ncclSuccess) break;
      if (i % 1000 == 999 && cudaStreamSynchronize(s) != cudaSuccess) break;  // the GPU keeps up
    }
    done.store(true);
  });
  // Growth is the peak resident size seen while the app thread ran (sampled every 10 ms and once
  // at the end) over the size before it, never negative: the allocator and the sanitizers'
  // runtimes return pages meanwhile, so the size at the end can be below the one before.
  uint64_t resident_peak = resident_before;
  for (int i = 0; i < 6000 && !done.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    resident_peak = std::max(resident_peak, ResidentBytes());
  }
  bool finished = done.load();
  resident_peak = std::max(resident_peak, ResidentBytes());
  const uint64_t grown = resident_peak - resident_before;
  std::printf("stalled poller: %llu ops, resident peak %llu bytes above the start\n",
              static_cast<unsigned long long>(kOps), static_cast<unsigned long long>(grown));
  uint64_t dropped = Own().header()->ring_dropped.load() - dropped_before;
  EXPECT_EQ(Own().header()->heartbeat_count.load(), beat) << "the poller ran meanwhile";
  g_hold_poller.store(false);
  app.join();
  EXPECT_TRUE(finished) << "an app thread waited for the stalled poller";
#if defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine keeps freed memory resident (256 MB by default), so resident growth says
  // nothing about what libft.so keeps; the bound is checked by the plain build.
  (void)grown;
#else
  EXPECT_LT(grown, 16u << 20) << "memory grew by " << grown << " bytes (peak) for " << kOps << " ops";
#endif
  EXPECT_GE(dropped, kOps - 2 * 4096) << "records that could not be handed over are counted";
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(WaitCompleted(c.id, kOps).completed_seq, kOps);
  (void)Records();  // empties the ring, which later tests read their records from
}

// What nvcc's generated code calls (crt/host_runtime.h declares them only inside generated
// code), and the _ptsz launch the headers declare only under --default-stream per-thread.
extern "C" {
void** __cudaRegisterFatBinary(void* fatbin);
void __cudaRegisterFatBinaryEnd(void** handle);
void __cudaRegisterFunction(void** handle, const char* host_fun, char* device_fun, const char* device_name,
                            int thread_limit, uint3* tid, uint3* bid, dim3* block, dim3* grid, int* wsize);
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_fun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t smem,
                               cudaStream_t stream);
cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args, size_t smem,
                                  cudaStream_t stream);
}

// A host stub (only its address matters) registered as nvcc's module constructor would; gpusim
// runs it for GPUSIM_KERNEL_DEFAULT_US (2 ms, set by CTest), having no CPU body for it.
char stub_sampled;

// Every launch counted on its stream (a _ptsz launch on stream 0 under cudaStreamPerThread);
// every FT_KERNEL_SAMPLE-th launch of a thread (4, set by CTest) timed on the GPU; nvcc's
// handles mapped back to the stub that has the name.
TEST(Behavior, KernelLaunchesAreCountedPerStreamAndSampled) {
  static int fatbin;
  void** module = __cudaRegisterFatBinary(&fatbin);
  __cudaRegisterFunction(module, &stub_sampled, const_cast<char*>("_Z7sampledPi"), "_Z7sampledPi", -1,
                         nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(module);
  cudaKernel_t handle = nullptr;
  ASSERT_EQ(__cudaGetKernel(&handle, &stub_sampled), cudaSuccess);
  cudaStream_t s1, s2;
  ASSERT_EQ(cudaStreamCreate(&s1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s2), cudaSuccess);
  int* arg = nullptr;
  void* args[] = {&arg};
  for (int i = 0; i < 12; ++i) ASSERT_EQ(cudaLaunchKernel(&stub_sampled, dim3(1), dim3(32), args, 0, s1), cudaSuccess);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(__cudaLaunchKernel(handle, dim3(1), dim3(32), args, 0, s2), cudaSuccess);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(cudaLaunchKernel_ptsz(&stub_sampled, dim3(1), dim3(32), args, 0, nullptr), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);

  // Counts are reported once a second: wait for all three streams' totals.
  auto total_on = [](cudaStream_t stream) {
    uint64_t total = 0;
    for (const auto& r : Records()) {
      if (Is(r, RecordType::kKernelCount) && r.a == reinterpret_cast<uintptr_t>(stream)) total = r.b;
    }
    return total;
  };
  test_util::WaitUntil(
      [&] { return total_on(s1) >= 12 && total_on(s2) >= 8 && total_on(cudaStreamPerThread) >= 4; });
  EXPECT_EQ(total_on(s1), 12u);
  EXPECT_EQ(total_on(s2), 8u);
  EXPECT_EQ(total_on(cudaStreamPerThread), 4u);
  uint64_t deltas = 0;
  for (const auto& r : Records()) {
    if (Is(r, RecordType::kKernelCount) && r.a == reinterpret_cast<uintptr_t>(s1)) deltas += r.c;
  }
  EXPECT_EQ(deltas, 12u) << "the deltas of one stream add up to its total";

  // 24 launches on this thread, every 4th sampled: 6 samples of a 2 ms kernel.
  std::vector<shm::Record> samples;
  test_util::WaitUntil([&] {
    samples.clear();
    for (const auto& r : Records()) {
      if (Is(r, RecordType::kKernelSample)) samples.push_back(r);
    }
    return samples.size() >= 6;
  });
  ASSERT_EQ(samples.size(), 6u);
  for (const auto& r : samples) {
    EXPECT_TRUE(r.a == reinterpret_cast<uintptr_t>(&stub_sampled) || r.a == reinterpret_cast<uintptr_t>(handle));
    EXPECT_GE(r.b, 1'500'000u) << "GPU duration of a 2 ms kernel";
    EXPECT_LT(r.b, 1'000'000'000u);
    EXPECT_GT(r.d, 0u);
  }
  bool mapped = false, named = false;
  for (const auto& r : Records()) {
    mapped |= Is(r, RecordType::kKernelHandle) && r.a == reinterpret_cast<uintptr_t>(handle) &&
              r.b == reinterpret_cast<uintptr_t>(&stub_sampled);
    named |= Is(r, RecordType::kKernelName) && r.a == reinterpret_cast<uintptr_t>(&stub_sampled);
  }
  EXPECT_TRUE(mapped) << "no kKernelHandle for the handle nvcc's launches pass";
  EXPECT_TRUE(named);
  EXPECT_EQ(cudaStreamDestroy(s1), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s2), cudaSuccess);
}

TEST(Behavior, MailboxCommandsAreAcknowledgedAsUnsupported) {
  uint64_t seq = 0;
  uint8_t payload[4] = {1, 2, 3, 4};
  ASSERT_TRUE(shm::PostCommand(Own(), 99, payload, &seq).ok());
  std::optional<shm::Ack> ack;
  test_util::WaitUntil([&] { return (ack = shm::PollAck(Own(), seq)).has_value(); });
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->result, static_cast<int32_t>(StatusCode::kUnsupported));
  EXPECT_NE(ack->message.find("not supported"), std::string::npos) << ack->message;
}

TEST(Behavior, HeartbeatAdvances) {
  uint64_t before = Own().header()->heartbeat_count.load();
  EXPECT_TRUE(test_util::WaitUntil([&] { return Own().header()->heartbeat_count.load() > before; }));
  EXPECT_GT(Own().header()->call_count.load(), 0u);
}

// The child half of ExitStatusIsWrittenBeforeExited: run (re-executed, under LD_PRELOAD) only
// when FT_TEST_EXIT_STATUS is set. It makes a CUDA call (libft.so creates its segment), waits
// until the parent has attached, then exits with that status.
// ft_step_done leaves a StepDone mark in the ring, stamped at the call, carrying its step:
// the worker's step boundaries when the app declares its steps.
TEST(Behavior, StepDoneLeavesAMarkWithItsStep) {
  uint64_t before_ns = 0;
  {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    before_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
  // From the preloaded libft.so, as an app that does not link it finds it.
  auto step_done = reinterpret_cast<int (*)(int64_t)>(dlsym(RTLD_DEFAULT, "ft_step_done"));
  ASSERT_NE(step_done, nullptr);
  (void)step_done(41);  // nothing registered: whatever it returns, the mark is made
  (void)step_done(42);
  std::vector<shm::Record> marks;
  test_util::WaitUntil([&] {
    marks.clear();
    for (const auto& r : Records()) {
      if (Is(r, RecordType::kStepDone) && r.time_ns >= before_ns) marks.push_back(r);
    }
    return marks.size() >= 2;
  });
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].a, 41u);
  EXPECT_EQ(marks[1].a, 42u);
  EXPECT_LE(marks[0].time_ns, marks[1].time_ns);
}

// The steps the job runs in all reach the header for the worker: FT_TOTAL_STEPS (500, set by
// CTest) at start, then ft_set_total_steps, whose bad values change nothing; and ft_step_done's
// step beside it (the steps left are the difference).
TEST(Behavior, TotalStepsReachTheHeaderFromTheEnvironmentThenTheApi) {
  auto set_total = reinterpret_cast<int (*)(int64_t)>(dlsym(RTLD_DEFAULT, "ft_set_total_steps"));
  auto step_done = reinterpret_cast<int (*)(int64_t)>(dlsym(RTLD_DEFAULT, "ft_step_done"));
  ASSERT_NE(set_total, nullptr) << "libft.so does not export ft_set_total_steps";
  ASSERT_NE(step_done, nullptr);
  EXPECT_EQ(Own().header()->total_steps.load(), 500) << "FT_TOTAL_STEPS";
  EXPECT_EQ(set_total(1000), 0);  // FT_OK
  EXPECT_EQ(Own().header()->total_steps.load(), 1000);
  EXPECT_EQ(set_total(0), 2);     // FT_INVALID_ARGUMENT
  EXPECT_EQ(set_total(-7), 2);
  EXPECT_EQ(Own().header()->total_steps.load(), 1000) << "a refused value changed the total";
  (void)step_done(150);  // nothing registered: whatever it returns, the step is written
  EXPECT_EQ(Own().header()->app_step_plus1.load(), 151);
}

TEST(ExitHelper, ExitsWithStatus) {
  const char* status = getenv("FT_TEST_EXIT_STATUS");
  const char* fd = getenv("FT_TEST_EXIT_FD");
  if (status == nullptr || fd == nullptr) GTEST_SKIP() << "helper for ExitStatusIsWrittenBeforeExited";
  void* p = nullptr;
  if (cudaMalloc(&p, 64) != cudaSuccess) _exit(100);
  char byte = 0;
  if (read(atoi(fd), &byte, 1) != 1) _exit(101);
  exit(atoi(status));
}

TEST(Behavior, ExitStatusIsWrittenBeforeExited) {
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(go[1]);
    setenv("FT_TEST_EXIT_STATUS", "7", 1);
    setenv("FT_TEST_EXIT_FD", std::to_string(go[0]).c_str(), 1);
    execl("/proc/self/exe", "preload_behavior_test", "--gtest_filter=ExitHelper.*", nullptr);
    _exit(102);
  }
  close(go[0]);
  // Attach while it runs: the mapping outlives the unlink at its exit.
  std::unique_ptr<shm::Segment> seg;
  for (int i = 0; i < 1000 && !seg; ++i) {
    if (!shm::Segment::Attach(shm::SegmentName(kJob, -1, child), &seg).ok()) {
      seg.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ASSERT_TRUE(seg != nullptr) << "the child's segment never appeared";
  EXPECT_EQ(seg->header()->state.load(), static_cast<uint32_t>(shm::ProcessState::kRunning));
  ASSERT_EQ(write(go[1], "x", 1), 1);
  close(go[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_EQ(seg->header()->state.load(), static_cast<uint32_t>(shm::ProcessState::kExited));
  EXPECT_EQ(seg->header()->exit_status.load(), 7);
  // A failing status leaves the segment for the worker to report and reclaim (only a clean
  // exit removes it): here nobody else will.
  std::unique_ptr<shm::Segment> again;
  EXPECT_TRUE(shm::Segment::Attach(shm::SegmentName(kJob, -1, child), &again).ok())
      << "a failing exit leaves its segment for the worker";
  again.reset();
  shm_unlink(shm::SegmentName(kJob, -1, child).c_str());
}

TEST(Behavior, ForkedChildRunsUnmonitoredAndLeavesTheParentsSegment) {
  uint64_t calls = Own().header()->call_count.load();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void* p = nullptr;
    bool ok = cudaMalloc(&p, 64) == cudaSuccess && cudaFree(p) == cudaSuccess;
    std::unique_ptr<shm::Segment> own;
    bool has_segment = shm::Segment::Attach(shm::SegmentName(kJob, -1, getpid()), &own).ok();
    exit(ok && !has_segment ? 0 : 1);  // runs libft.so's exit handler: it must not touch the parent's
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(Own().header()->call_count.load(), calls) << "the child wrote into the parent's segment";
  std::unique_ptr<shm::Segment> again;
  EXPECT_TRUE(shm::Segment::Attach(shm::SegmentName(kJob, -1, getpid()), &again).ok());
  EXPECT_EQ(Own().header()->state.load(), static_cast<uint32_t>(shm::ProcessState::kRunning));
}

}  // namespace
}  // namespace ft::preload

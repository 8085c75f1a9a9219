// Communicator life cycle and composition: split (dp/tp), shrink, nonblocking init, init
// timeout, InitAll and grouped init, groups of collectives and point-to-point messages, graph
// capture, PreMulSum, argument validation on a live communicator.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "harness.h"

namespace gpusim_test {
namespace {

class Lifecycle : public NcclTest {};

// Polls until the communicator is no longer in progress.
ncclResult_t WaitReady(ncclComm_t comm, double timeout_s = 20) {
  const double deadline = NowS() + timeout_s;
  ncclResult_t st = ncclInProgress;
  while (NowS() < deadline) {
    if (ncclCommGetAsyncError(comm, &st) != ncclSuccess) return ncclInternalError;
    if (st != ncclInProgress) return st;
    usleep(1000);
  }
  return st;
}

int SumAllReduce(ncclComm_t comm, cudaStream_t s, int value) {
  int in = value, out = -1;
  if (ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, comm, s) != ncclSuccess) return -999;
  if (cudaStreamSynchronize(s) != cudaSuccess) return -998;
  return out;
}

// 8 ranks as tp=2 x dp=4: tp groups {0,1},{2,3},..; dp groups {0,2,4,6},{1,3,5,7}, with keys
// that reverse the dp order; a third split leaves odd ranks out (NCCL_SPLIT_NOCOLOR).
TEST_F(Lifecycle, SplitIntoDataAndTensorParallelGroups) {
  const int n = 8, tp = 2;
  ncclUniqueId id = NewId();
  auto out = RunRanks(n, 40, [&](int me) {
    ncclComm_t world, tpc, dpc, evens;
    CHILD_NCCL(ncclCommInitRank(&world, n, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    CHILD_NCCL(ncclCommSplit(world, me / tp, me, &tpc, nullptr));
    CHILD_NCCL(ncclCommSplit(world, me % tp, -me, &dpc, nullptr));
    CHILD_NCCL(ncclCommSplit(world, me % 2 == 0 ? 0 : NCCL_SPLIT_NOCOLOR, me, &evens, nullptr));
    int count = 0, rank = -1;
    CHILD_NCCL(ncclCommCount(tpc, &count));
    CHILD_NCCL(ncclCommUserRank(tpc, &rank));
    CHILD_CHECK(count == tp && rank == me % tp, "tp count %d rank %d", count, rank);
    CHILD_NCCL(ncclCommCount(dpc, &count));
    CHILD_NCCL(ncclCommUserRank(dpc, &rank));
    // keys -me: the highest world rank comes first.
    CHILD_CHECK(count == n / tp && rank == (n / tp - 1) - me / tp, "dp count %d rank %d", count, rank);
    if (me % 2 == 0) {
      CHILD_CHECK(evens != nullptr);
      CHILD_CHECK(SumAllReduce(evens, s, me) == 0 + 2 + 4 + 6);
      CHILD_NCCL(ncclCommDestroy(evens));
    } else {
      CHILD_CHECK(evens == nullptr);
    }
    int tp_base = me / tp * tp;
    CHILD_CHECK(SumAllReduce(tpc, s, me) == tp_base + tp_base + 1);
    CHILD_CHECK(SumAllReduce(dpc, s, me) == (me % tp == 0 ? 0 + 2 + 4 + 6 : 1 + 3 + 5 + 7));
    // Order within dp follows the keys: gather world ranks.
    std::vector<int> ranks(n / tp, -1);
    CHILD_NCCL(ncclAllGather(&me, ranks.data(), 1, ncclInt32, dpc, s));
    CHILD_CUDA(cudaStreamSynchronize(s));
    for (int i = 0; i < n / tp; ++i) {
      CHILD_CHECK(ranks[i] == (n / tp - 1 - i) * tp + me % tp, "dp member %d is world rank %d", i, ranks[i]);
    }
    // Collectives on the parent still work after the splits.
    CHILD_CHECK(SumAllReduce(world, s, 1) == n);
    // Every member has now finished all its inits, so every segment name is gone already
    // (unlinked once all members attached): a crash from here on leaks nothing.
    CHILD_CHECK(OurSegments().empty(), "%zu segment names left", OurSegments().size());
    CHILD_NCCL(ncclCommDestroy(tpc));
    CHILD_NCCL(ncclCommDestroy(dpc));
    CHILD_NCCL(ncclCommDestroy(world));
  });
  ExpectAllOk(out);
}

TEST_F(Lifecycle, ShrinkExcludesAMember) {
  const int n = 4;
  ncclUniqueId id = NewId();
  auto out = RunRanks(n, 30, [&](int me) {
    ncclComm_t world, small;
    CHILD_NCCL(ncclCommInitRank(&world, n, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    if (me == 1) {  // the failed member: takes no part
      CHILD_NCCL(ncclCommAbort(world));
      return;
    }
    int excluded[] = {1};
    CHILD_NCCL(ncclCommShrink(world, excluded, 1, &small, nullptr, NCCL_SHRINK_DEFAULT));
    int count = 0, rank = -1;
    CHILD_NCCL(ncclCommCount(small, &count));
    CHILD_NCCL(ncclCommUserRank(small, &rank));
    CHILD_CHECK(count == 3 && rank == (me == 0 ? 0 : me - 1), "count %d rank %d", count, rank);
    CHILD_CHECK(SumAllReduce(small, s, me) == 0 + 2 + 3);
    CHILD_NCCL(ncclCommDestroy(small));
    CHILD_NCCL(ncclCommDestroy(world));
  });
  ExpectAllOk(out);
}

TEST_F(Lifecycle, NonblockingInitCollectiveAndSplit) {
  const int n = 2;
  ncclUniqueId id = NewId();
  // Rank 1 joins only after rank 0 has seen its init in progress (a sleep could pass before a
  // loaded machine even ran rank 0).
  int seen[2];
  ASSERT_EQ(pipe(seen), 0);
  auto out = RunRanks(n, 30, [&](int me) {
    char byte = 0;
    if (me == 1) CHILD_CHECK(read(seen[0], &byte, 1) == 1, "rank 0 never said its init is in progress");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t comm;
    CHILD_CHECK(ncclCommInitRankConfig(&comm, n, id, me, &cfg) == ncclInProgress);
    if (me == 0) {
      ncclResult_t st;
      CHILD_NCCL(ncclCommGetAsyncError(comm, &st));
      CHILD_CHECK(st == ncclInProgress);
      CHILD_CHECK(write(seen[1], "x", 1) == 1);
    }
    CHILD_CHECK(WaitReady(comm) == ncclSuccess, "%s", ncclGetLastError(comm));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    std::vector<double> in(5000, me + 1.0), res(5000, 0);
    CHILD_CHECK(ncclAllReduce(in.data(), res.data(), in.size(), ncclFloat64, ncclSum, comm, s) == ncclInProgress);
    CHILD_CHECK(WaitReady(comm) == ncclSuccess);
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(res[0] == 3.0 && res[4999] == 3.0);
    // A split inherits nonblocking from its parent.
    ncclComm_t child;
    CHILD_CHECK(ncclCommSplit(comm, 0, me, &child, nullptr) == ncclInProgress);
    CHILD_CHECK(WaitReady(child) == ncclSuccess, "%s", ncclGetLastError(child));
    CHILD_CHECK(WaitReady(comm) == ncclSuccess);
    CHILD_CHECK(ncclGroupStart() == ncclSuccess);
    CHILD_CHECK(ncclAllReduce(in.data(), res.data(), 1, ncclFloat64, ncclMax, child, s) == ncclSuccess);
    CHILD_CHECK(ncclGroupEnd() == ncclInProgress);
    CHILD_CHECK(WaitReady(child) == ncclSuccess);
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(res[0] == 2.0);
    CHILD_NCCL(ncclCommDestroy(child));
    CHILD_NCCL(ncclCommDestroy(comm));
  });
  close(seen[0]);
  close(seen[1]);
  ExpectAllOk(out);
}

TEST_F(Lifecycle, InitWithAMissingMemberTimesOutWithAClearError) {
  ncclUniqueId id = NewId();
  auto out = RunRanks(1, 30, [&](int) {
    setenv("GPUSIM_NCCL_INIT_TIMEOUT_S", "1", 1);
    ncclComm_t comm = reinterpret_cast<ncclComm_t>(0x1);
    double t = NowS();
    ncclResult_t r = ncclCommInitRank(&comm, 2, id, 0);
    double took = NowS() - t;
    CHILD_CHECK(r == ncclSystemError, "returned %d", static_cast<int>(r));
    CHILD_CHECK(took > 0.9 && took < 5, "took %.2f s", took);
    CHILD_CHECK(comm == nullptr);
    const char* e = ncclGetLastError(nullptr);
    CHILD_CHECK(std::strstr(e, "timed out") != nullptr && std::strstr(e, "missing ranks: 1") != nullptr,
                "%s", e);
  });
  ExpectAllOk(out);
}

TEST_F(Lifecycle, InitAllAndOneThreadDrivingAGroupOverItsCommunicators) {
  auto out = RunRanks(1, 30, [&](int) {
    const int n = 4;
    ncclComm_t comms[n];
    CHILD_NCCL(ncclCommInitAll(comms, n, nullptr));
    cudaStream_t s[n];
    std::vector<std::vector<float>> in(n), res(n);
    for (int i = 0; i < n; ++i) {
      int dev = -1, rank = -1;
      CHILD_NCCL(ncclCommCuDevice(comms[i], &dev));
      CHILD_NCCL(ncclCommUserRank(comms[i], &rank));
      CHILD_CHECK(dev == i && rank == i);
      CHILD_CUDA(cudaStreamCreate(&s[i]));
      in[i].assign(100000, static_cast<float>(i));
      res[i].assign(100000, -1);
    }
    CHILD_NCCL(ncclGroupStart());
    for (int i = 0; i < n; ++i) {
      CHILD_NCCL(ncclAllReduce(in[i].data(), res[i].data(), in[i].size(), ncclFloat32, ncclSum, comms[i], s[i]));
    }
    CHILD_NCCL(ncclGroupEnd());
    for (int i = 0; i < n; ++i) {
      CHILD_CUDA(cudaStreamSynchronize(s[i]));
      CHILD_CHECK(res[i][0] == 6.0f && res[i].back() == 6.0f);
      CHILD_NCCL(ncclCommDestroy(comms[i]));
    }
    // Several members of one communicator created by one thread inside a group.
    ncclUniqueId id = NewId();
    ncclComm_t g[3];
    CHILD_NCCL(ncclGroupStart());
    CHILD_NCCL(ncclCommInitRank(&g[0], 3, id, 0));
    CHILD_NCCL(ncclCommInitRankConfig(&g[1], 3, id, 1, nullptr));
    CHILD_NCCL(ncclCommInitRankScalable(&g[2], 3, 2, 1, &id, nullptr));
    CHILD_NCCL(ncclGroupEnd());
    int total = 0;
    for (int i = 0; i < 3; ++i) {
      int c = 0;
      CHILD_NCCL(ncclCommCount(g[i], &c));
      total += c;
      CHILD_NCCL(ncclCommDestroy(g[i]));
    }
    CHILD_CHECK(total == 9);
  });
  ExpectAllOk(out);
}

// A pipeline-style exchange in one group: everyone sends 16 MiB to the next rank and receives
// from the previous (far more than the channel holds), plus an all-pairs exchange including
// self; no deadlock, right data.
TEST_F(Lifecycle, GroupedSendRecvRingWithLargeMessages) {
  const int n = 4;
  ncclUniqueId id = NewId();
  auto out = RunRanks(n, 40, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, n, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    const size_t big = (16u << 20) / 4;
    std::vector<uint32_t> send(big), recv(big, 0);
    for (size_t i = 0; i < big; ++i) send[i] = static_cast<uint32_t>(me * 0x1000000u + i);
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    CHILD_NCCL(ncclGroupStart());
    CHILD_NCCL(ncclSend(send.data(), big, ncclUint32, next, comm, s));
    CHILD_NCCL(ncclRecv(recv.data(), big, ncclUint32, prev, comm, s));
    CHILD_NCCL(ncclGroupEnd());
    // All pairs, sizes differing per pair, including a message to self.
    std::vector<std::vector<int64_t>> to(n), from(n);
    CHILD_NCCL(ncclGroupStart());
    for (int p = 0; p < n; ++p) {
      to[p].resize(70000 + 1000 * (me * n + p));
      std::iota(to[p].begin(), to[p].end(), me * 1000000 + p * 10000);
      from[p].assign(70000 + 1000 * (p * n + me), -1);
      CHILD_NCCL(ncclSend(to[p].data(), to[p].size(), ncclInt64, p, comm, s));
      CHILD_NCCL(ncclRecv(from[p].data(), from[p].size(), ncclInt64, p, comm, s));
    }
    CHILD_NCCL(ncclGroupEnd());
    CHILD_CUDA(cudaStreamSynchronize(s));
    for (size_t i = 0; i < big; i += 997) {
      CHILD_CHECK(recv[i] == static_cast<uint32_t>(prev * 0x1000000u + i), "element %zu", i);
    }
    CHILD_CHECK(recv[big - 1] == static_cast<uint32_t>(prev * 0x1000000u + big - 1));
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < from[p].size(); ++i) {
        CHILD_CHECK(from[p][i] == static_cast<int64_t>(p * 1000000 + me * 10000 + i), "from %d element %zu", p, i);
      }
    }
    ncclResult_t st;
    CHILD_NCCL(ncclCommGetAsyncError(comm, &st));
    CHILD_CHECK(st == ncclSuccess);
    CHILD_NCCL(ncclCommDestroy(comm));
  });
  ExpectAllOk(out);
}

// Several collectives and point-to-point messages of two communicators in one group.
TEST_F(Lifecycle, GroupOfCollectivesAndMessagesOnTwoCommunicators) {
  const int n = 3;
  ncclUniqueId a = NewId(), b = NewId();
  auto out = RunRanks(n, 30, [&](int me) {
    ncclComm_t ca, cb;
    CHILD_NCCL(ncclCommInitRank(&ca, n, a, me));
    CHILD_NCCL(ncclCommInitRank(&cb, n, b, me));
    cudaStream_t s1, s2;
    CHILD_CUDA(cudaStreamCreate(&s1));
    CHILD_CUDA(cudaStreamCreate(&s2));
    std::vector<int> x(30000, me + 1), sum(30000), gathered(3 * 30000), bc(30000, me), msg(30000, me), got(30000);
    CHILD_NCCL(ncclGroupStart());
    CHILD_NCCL(ncclAllReduce(x.data(), sum.data(), x.size(), ncclInt32, ncclSum, ca, s1));
    CHILD_NCCL(ncclAllGather(x.data(), gathered.data(), x.size(), ncclInt32, ca, s1));
    CHILD_NCCL(ncclBcast(bc.data(), bc.size(), ncclInt32, 2, cb, s2));
    CHILD_NCCL(ncclSend(msg.data(), msg.size(), ncclInt32, (me + 1) % n, cb, s2));
    CHILD_NCCL(ncclRecv(got.data(), got.size(), ncclInt32, (me + n - 1) % n, cb, s2));
    CHILD_NCCL(ncclGroupEnd());
    CHILD_CUDA(cudaStreamSynchronize(s1));
    CHILD_CUDA(cudaStreamSynchronize(s2));
    CHILD_CHECK(sum[0] == 6 && sum.back() == 6);
    for (int k = 0; k < n; ++k) CHILD_CHECK(gathered[k * 30000] == k + 1 && gathered[k * 30000 + 29999] == k + 1);
    CHILD_CHECK(bc[0] == 2 && bc.back() == 2);
    CHILD_CHECK(got[0] == (me + n - 1) % n && got.back() == (me + n - 1) % n);
    CHILD_NCCL(ncclCommDestroy(ca));
    CHILD_NCCL(ncclCommDestroy(cb));
  });
  ExpectAllOk(out);
}

// A collective captured into a CUDA graph runs at every launch, with a fresh sequence number.
TEST_F(Lifecycle, CapturedCollectiveRunsAtEveryGraphLaunch) {
  const int n = 2;
  ncclUniqueId id = NewId();
  auto out = RunRanks(n, 30, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, n, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    std::vector<float> in(3000), res(3000);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHILD_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHILD_NCCL(ncclAllReduce(in.data(), res.data(), in.size(), ncclFloat32, ncclSum, comm, s));
    CHILD_CUDA(cudaStreamEndCapture(s, &graph));
    CHILD_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int launch = 0; launch < 3; ++launch) {
      std::fill(in.begin(), in.end(), static_cast<float>(launch * 10 + me));
      std::fill(res.begin(), res.end(), -1.0f);
      CHILD_CUDA(cudaGraphLaunch(exec, s));
      CHILD_CUDA(cudaStreamSynchronize(s));
      float want = static_cast<float>(2 * launch * 10 + 1);
      CHILD_CHECK(res[0] == want && res.back() == want, "launch %d: %f", launch, res[0]);
      // Interleave an ordinary collective: sequence numbers stay aligned across members.
      CHILD_CHECK(SumAllReduce(comm, s, 1) == 2);
    }
    CHILD_CUDA(cudaGraphExecDestroy(exec));
    CHILD_CUDA(cudaGraphDestroy(graph));
    CHILD_NCCL(ncclCommDestroy(comm));
  });
  ExpectAllOk(out);
}

TEST_F(Lifecycle, PreMulSumAndArgumentValidation) {
  const int n = 2;
  ncclUniqueId id = NewId();
  auto out = RunRanks(n, 30, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, n, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    float x[4] = {1, 2, 3, 4}, y[4] = {0};
    // Rejected calls enqueue nothing (so members stay matched).
    CHILD_CHECK(ncclAllReduce(x, y, 4, ncclFloat8e4m3, ncclSum, comm, s) == ncclInvalidArgument);
    CHILD_CHECK(ncclAllReduce(x, y, 4, static_cast<ncclDataType_t>(99), ncclSum, comm, s) == ncclInvalidArgument);
    CHILD_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, static_cast<ncclRedOp_t>(ncclNumOps + 3), comm, s) == ncclInvalidArgument);
    CHILD_CHECK(ncclReduce(x, y, 4, ncclFloat32, ncclSum, n, comm, s) == ncclInvalidArgument);
    CHILD_CHECK(ncclBroadcast(x, y, 4, ncclFloat32, -1, comm, s) == ncclInvalidArgument);
    CHILD_CHECK(ncclSend(x, 4, ncclFloat32, n, comm, s) == ncclInvalidArgument);
    CHILD_CHECK(ncclAllReduce(nullptr, y, 4, ncclFloat32, ncclSum, comm, s) == ncclInvalidArgument);
    CHILD_CHECK(std::strstr(ncclGetLastError(comm), "sendbuff") != nullptr, "%s", ncclGetLastError(comm));
    // An error inside a group fails the group and drops its work.
    CHILD_NCCL(ncclGroupStart());
    CHILD_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    CHILD_CHECK(ncclRecv(y, 4, ncclFloat32, 7, comm, s) == ncclInvalidArgument);
    CHILD_CHECK(ncclGroupEnd() == ncclInvalidArgument);
    // PreMulSum: sum of x * 0.5 over ranks.
    ncclRedOp_t half_sum;
    float scalar = 0.5f;
    CHILD_NCCL(ncclRedOpCreatePreMulSum(&half_sum, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
    scalar = 100;  // captured at creation
    CHILD_NCCL(ncclAllReduce(x, y, 4, ncclFloat32, half_sum, comm, s));
    CHILD_CUDA(cudaStreamSynchronize(s));
    for (int i = 0; i < 4; ++i) CHILD_CHECK(y[i] == x[i], "y[%d] = %f", i, y[i]);
    CHILD_CHECK(ncclAllReduce(x, y, 4, ncclFloat64, half_sum, comm, s) == ncclInvalidArgument);
    CHILD_NCCL(ncclRedOpDestroy(half_sum, comm));
    CHILD_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, half_sum, comm, s) == ncclInvalidArgument);
    CHILD_CHECK(ncclRedOpDestroy(ncclSum, comm) == ncclInvalidArgument);
    // Still matched: a plain collective gives the right answer.
    CHILD_CHECK(SumAllReduce(comm, s, me + 1) == 3);
    void* handle = nullptr;
    CHILD_NCCL(ncclCommRegister(comm, x, sizeof x, &handle));
    CHILD_CHECK(handle != nullptr);
    CHILD_NCCL(ncclCommDeregister(comm, handle));
    CHILD_NCCL(ncclCommFinalize(comm));
    CHILD_NCCL(ncclCommDestroy(comm));
  });
  ExpectAllOk(out);
}

// GPUSIM_NCCL_DEBUG=1 prints init and abort lines; without it the library prints nothing.
// Also: a one-member communicator works.
TEST_F(Lifecycle, DebugLinesOnlyWhenAskedFor) {
  char path[] = "/tmp/gpusim-nccl-stderr-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  for (bool debug : {false, true}) {
    auto out = RunRanks(1, 20, [&](int) {
      if (debug) setenv("GPUSIM_NCCL_DEBUG", "1", 1);
      else unsetenv("GPUSIM_NCCL_DEBUG");
      setenv("GPUSIM_NCCL_STALL", "not:a:number", 1);  // malformed: ignored (debug says so)
      FILE* f = freopen(path, "w", stderr);
      CHILD_CHECK(f != nullptr);
      ncclUniqueId id = NewId();
      ncclComm_t comm;
      CHILD_NCCL(ncclCommInitRank(&comm, 1, id, 0));
      cudaStream_t s;
      CHILD_CUDA(cudaStreamCreate(&s));
      CHILD_CHECK(SumAllReduce(comm, s, 41) == 41);
      CHILD_NCCL(ncclCommAbort(comm));
    });
    ExpectAllOk(out);
    FILE* f = std::fopen(path, "r");
    ASSERT_NE(f, nullptr);
    std::string text;
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) text += buf;
    std::fclose(f);
    if (debug) {
      EXPECT_NE(text.find("init comm comm0"), std::string::npos) << text;
      EXPECT_NE(text.find("abort comm comm0"), std::string::npos) << text;
      EXPECT_NE(text.find("GPUSIM_NCCL_STALL"), std::string::npos) << text;
    } else {
      EXPECT_EQ(text, "");
    }
  }
  unlink(path);
}

}  // namespace
}  // namespace gpusim_test

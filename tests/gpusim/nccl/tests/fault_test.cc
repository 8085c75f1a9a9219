// Hangs and their release: a missing peer blocks the stream (not the calling thread) at little
// CPU cost; ncclCommAbort releases it without touching the output; the other members learn of
// the abort; GPUSIM_NCCL_STALL makes one communicator's N+1-th collective hang on all members.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <thread>
#include <vector>

#include "harness.h"
#include "violation.h"

namespace gpusim_test {
namespace {

class Faults : public NcclTest {};

constexpr float kUntouched = -7.25f;

bool AllEqual(const std::vector<float>& v, float x) {
  for (float f : v) {
    if (f != x) return false;
  }
  return true;
}

// Waits until ncclCommGetAsyncError stops saying ncclSuccess/ncclInProgress, up to timeout_s.
ncclResult_t WaitAsyncError(ncclComm_t comm, double timeout_s) {
  const double deadline = NowS() + timeout_s;
  ncclResult_t st = ncclSuccess;
  do {
    if (ncclCommGetAsyncError(comm, &st) != ncclSuccess) return ncclInternalError;
    if (st != ncclSuccess && st != ncclInProgress) return st;
    usleep(5000);
  } while (NowS() < deadline);
  return st;
}

TEST_F(Faults, MissingPeerBlocksTheStreamNotTheThreadAndAbortReleasesIt) {
  ncclUniqueId id = NewId();
  auto out = RunRanks(2, 30, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, 2, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    const size_t n = 1 << 16;
    std::vector<float> send(n, 1.0f), recv(n, kUntouched);
    if (me == 1) {
      // The missing peer: never calls the collective; learns that rank 0 aborted.
      CHILD_CHECK(WaitAsyncError(comm, 15) == ncclRemoteError);
      CHILD_CHECK(std::strstr(ncclGetLastError(comm), "rank 0") != nullptr, "%s", ncclGetLastError(comm));
      // New work on the aborted communicator fails fast: the stream does not hang.
      CHILD_NCCL(ncclAllReduce(send.data(), recv.data(), n, ncclFloat32, ncclSum, comm, s));
      double t = NowS();
      CHILD_CUDA(cudaStreamSynchronize(s));
      CHILD_CHECK(NowS() - t < 5.0);  // fails fast, not hung (5 s: room for a loaded machine)
      CHILD_CHECK(AllEqual(recv, kUntouched));
      CHILD_NCCL(ncclCommDestroy(comm));
      return;
    }
    double t0 = NowS();
    CHILD_NCCL(ncclAllReduce(send.data(), recv.data(), n, ncclFloat32, ncclSum, comm, s));
    // Returns without its peer (which never comes): 1 s leaves room for a loaded machine.
    CHILD_CHECK(NowS() - t0 < 1.0, "the call took %.3f s", NowS() - t0);
    usleep(100 * 1000);
    double cpu0 = ProcessCpuS(), w0 = NowS();
    while (NowS() - t0 < 2.0) usleep(10 * 1000);
    CHILD_CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    double cpu = (ProcessCpuS() - cpu0) / (NowS() - w0);
    std::fprintf(stderr, "blocked rank: %.3f%% of a core while its collective waits for a peer\n",
                 cpu * 100);
    CHILD_CHECK(cpu < 0.05, "blocked rank burns %.1f%% of a core", cpu * 100);
    CHILD_CHECK(AllEqual(recv, kUntouched));
    double t1 = NowS();
    CHILD_NCCL(ncclCommAbort(comm));
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(NowS() - t1 < 5.0, "stream released %.3f s after the abort", NowS() - t1);
    CHILD_CHECK(AllEqual(recv, kUntouched));
    // The stream goes on working.
    CHILD_CUDA(cudaMemcpyAsync(recv.data(), send.data(), sizeof(float), cudaMemcpyHostToHost, s));
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(recv[0] == 1.0f);
  });
  ExpectAllOk(out);
}

// A grouped send/recv waiting for a peer that never posts is released by abort too.
TEST_F(Faults, AbortReleasesAGroupedPointToPointExchange) {
  ncclUniqueId id = NewId();
  auto out = RunRanks(2, 30, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, 2, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    std::vector<float> send(1 << 20, 2.0f), recv(1 << 20, kUntouched);
    if (me == 1) {
      CHILD_CHECK(WaitAsyncError(comm, 15) == ncclRemoteError);
      CHILD_NCCL(ncclCommAbort(comm));
      return;
    }
    CHILD_NCCL(ncclGroupStart());
    CHILD_NCCL(ncclSend(send.data(), send.size(), ncclFloat32, 1, comm, s));
    CHILD_NCCL(ncclRecv(recv.data(), recv.size(), ncclFloat32, 1, comm, s));
    CHILD_NCCL(ncclGroupEnd());
    usleep(300 * 1000);
    CHILD_CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    double t1 = NowS();
    CHILD_NCCL(ncclCommAbort(comm));
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(NowS() - t1 < 5.0);  // released, not hung (5 s: room for a loaded machine)
    CHILD_CHECK(AllEqual(recv, kUntouched));
  });
  ExpectAllOk(out);
}

// GPUSIM_NCCL_STALL="stallme:3" in one member's environment: the first 3 collectives of the
// communicator named "stallme" complete, the 4th hangs on every member until abort; another
// communicator of the same processes keeps working.
TEST_F(Faults, StallInjectionHangsTheNamedCommunicatorAfterNCollectives) {
  const int n = 3;
  ncclUniqueId id = NewId(), other_id = NewId();
  auto out = RunRanks(n, 30, [&](int me) {
    if (me == 0) setenv("GPUSIM_NCCL_STALL", "unrelated:0,stallme:3", 1);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = "stallme";
    ncclComm_t comm, other;
    CHILD_NCCL(ncclCommInitRankConfig(&comm, n, id, me, &cfg));
    CHILD_NCCL(ncclCommInitRank(&other, n, other_id, me));
    cudaStream_t s, s2;
    CHILD_CUDA(cudaStreamCreate(&s));
    CHILD_CUDA(cudaStreamCreate(&s2));
    std::vector<float> send(1000, static_cast<float>(me + 1)), recv(1000);
    const float sum = n * (n + 1) / 2.0f;
    for (int k = 0; k < 3; ++k) {
      std::fill(recv.begin(), recv.end(), kUntouched);
      CHILD_NCCL(ncclAllReduce(send.data(), recv.data(), recv.size(), ncclFloat32, ncclSum, comm, s));
      CHILD_CUDA(cudaStreamSynchronize(s));
      CHILD_CHECK(AllEqual(recv, sum), "collective %d", k);
    }
    std::fill(recv.begin(), recv.end(), kUntouched);
    CHILD_NCCL(ncclAllReduce(send.data(), recv.data(), recv.size(), ncclFloat32, ncclSum, comm, s));
    usleep(1000 * 1000);
    CHILD_CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    ncclResult_t st;
    CHILD_NCCL(ncclCommGetAsyncError(comm, &st));
    CHILD_CHECK(st == ncclSuccess);
    // Also a barrier: nobody aborts "stallme" before everyone has seen it hang.
    std::vector<float> recv2(1000, kUntouched);
    CHILD_NCCL(ncclAllReduce(send.data(), recv2.data(), recv2.size(), ncclFloat32, ncclSum, other, s2));
    CHILD_CUDA(cudaStreamSynchronize(s2));
    CHILD_CHECK(AllEqual(recv2, sum));
    double t1 = NowS();
    CHILD_NCCL(ncclCommAbort(comm));
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(NowS() - t1 < 5.0);  // released, not hung (5 s: room for a loaded machine)
    CHILD_CHECK(AllEqual(recv, kUntouched));
    CHILD_NCCL(ncclCommDestroy(other));
  });
  ExpectAllOk(out);
}

// GPUSIM_NCCL_SLOW on point-to-point: a slow link's transfer starts once both ends are there and
// takes the extra time on both, whichever end arrives last. Lower bounds only: load only adds.
TEST_F(Faults, SlowLinkDelaysBothEndsOfEveryMessageFromWhenBothAreThere) {
  const int n = 2;
  ncclUniqueId slow_id = NewId(), sync_id = NewId();
  auto out = RunRanks(n, 30, [&](int me) {
    setenv("GPUSIM_NCCL_SLOW", "slowlink:300", 1);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = "slowlink";
    ncclComm_t comm, sync;
    CHILD_NCCL(ncclCommInitRankConfig(&comm, n, slow_id, me, &cfg));
    CHILD_NCCL(ncclCommInitRank(&sync, n, sync_id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    int x = 1, y = 0;
    CHILD_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, sync, s));  // both start together
    CHILD_CUDA(cudaStreamSynchronize(s));
    std::vector<float> buf(4096, me == 0 ? 3.5f : kUntouched);
    // Message 1: the receiver (rank 1) is 0.4 s late; the sender waits for it, then the link.
    double t0 = NowS();
    if (me == 0) {
      CHILD_NCCL(ncclSend(buf.data(), buf.size(), ncclFloat32, 1, comm, s));
    } else {
      usleep(400 * 1000);
      t0 = NowS();
      CHILD_NCCL(ncclRecv(buf.data(), buf.size(), ncclFloat32, 0, comm, s));
    }
    CHILD_CUDA(cudaStreamSynchronize(s));
    const double took = NowS() - t0;
    CHILD_CHECK(took >= (me == 0 ? 0.65 : 0.25), "message 1 took %.3f s on rank %d", took, me);
    CHILD_CHECK(AllEqual(buf, 3.5f));
    // Message 2, the other way: the receiver (rank 0) waits; the sender's own op takes the link's time.
    std::fill(buf.begin(), buf.end(), me == 1 ? 4.5f : kUntouched);
    t0 = NowS();
    if (me == 1) {
      CHILD_NCCL(ncclSend(buf.data(), buf.size(), ncclFloat32, 0, comm, s));
    } else {
      CHILD_NCCL(ncclRecv(buf.data(), buf.size(), ncclFloat32, 1, comm, s));
    }
    CHILD_CUDA(cudaStreamSynchronize(s));
    const double took2 = NowS() - t0;
    CHILD_CHECK(took2 >= 0.25, "message 2 took %.3f s on rank %d", took2, me);
    CHILD_CHECK(AllEqual(buf, 4.5f));
    CHILD_NCCL(ncclCommDestroy(comm));
    CHILD_NCCL(ncclCommDestroy(sync));
  });
  ExpectAllOk(out);
}

// Without commName the fallback name is "comm<k>", k counting this process's communicators.
TEST_F(Faults, StallInjectionByFallbackName) {
  const int n = 2;
  ncclUniqueId a = NewId(), b = NewId();
  auto out = RunRanks(n, 30, [&](int me) {
    setenv("GPUSIM_NCCL_STALL", "comm1:0", 1);
    ncclComm_t c0, c1;
    CHILD_NCCL(ncclCommInitRank(&c0, n, a, me));  // comm0
    CHILD_NCCL(ncclCommInitRank(&c1, n, b, me));  // comm1: its first collective hangs
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    int x = 1, y = 0;
    CHILD_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c0, s));
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(y == 2);
    y = -1;
    CHILD_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, c1, s));
    usleep(500 * 1000);
    CHILD_CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    cudaStream_t s2;  // barrier on comm0 before anyone aborts comm1
    CHILD_CUDA(cudaStreamCreate(&s2));
    CHILD_NCCL(ncclAllReduce(&x, &y, 0, ncclInt32, ncclSum, c0, s2));
    int z = 0;
    CHILD_NCCL(ncclAllReduce(&x, &z, 1, ncclInt32, ncclSum, c0, s2));
    CHILD_CUDA(cudaStreamSynchronize(s2));
    CHILD_CHECK(z == 2);
    CHILD_NCCL(ncclCommAbort(c1));
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(y == -1);
    CHILD_NCCL(ncclCommDestroy(c0));
  });
  ExpectAllOk(out);
}

// ncclCommRevoke stops this member's in-flight work; later calls are invalid usage; the other
// member sees a remote error.
TEST_F(Faults, RevokeReleasesInFlightWorkAndRejectsLaterCalls) {
  ncclUniqueId id = NewId();
  auto out = RunRanks(2, 30, [&](int me) {
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, 2, id, me));
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    double x = 1, y = kUntouched;
    if (me == 1) {
      CHILD_CHECK(WaitAsyncError(comm, 15) == ncclRemoteError);
      CHILD_NCCL(ncclCommAbort(comm));
      return;
    }
    CHILD_NCCL(ncclAllReduce(&x, &y, 1, ncclFloat64, ncclSum, comm, s));
    usleep(200 * 1000);
    CHILD_CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    CHILD_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(y == kUntouched);
    CHILD_CHECK(ncclAllReduce(&x, &y, 1, ncclFloat64, ncclSum, comm, s) == ncclInvalidUsage);
    CHILD_CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclInvalidUsage);
    CHILD_NCCL(ncclCommDestroy(comm));
  });
  ExpectAllOk(out);
}

// What real NCCL leaves undefined and gpusim reports (src/violation.h): a call on a destroyed
// or aborted communicator, and a call from another thread while an abort is in progress. A
// correct program makes neither (the count stays 0 until the first misuse).
TEST_F(Faults, CallsOnAnEndedOrEndingCommunicatorAreCountedViolations) {
  auto out = RunRanks(1, 30, [&](int) {
    setenv("GPUSIM_NCCL_TEARDOWN_MS", "300", 1);  // read at creation: an abort takes 300 ms
    ncclUniqueId id = NewId();
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, 1, id, 0));
    int n = 0;
    CHILD_NCCL(ncclCommCount(comm, &n));
    ncclResult_t st;
    CHILD_NCCL(ncclCommGetAsyncError(comm, &st));
    CHILD_CHECK(gpusimNcclViolationCount() == 0);
    // Another thread asks for the async error while this one aborts.
    std::atomic<bool> aborting{false}, done{false};
    std::thread other([&] {
      while (!aborting.load()) std::this_thread::yield();
      while (!done.load() && gpusimNcclViolationCount() == 0) {
        ncclResult_t ignored;
        (void)ncclCommGetAsyncError(comm, &ignored);
      }
    });
    aborting.store(true);
    CHILD_NCCL(ncclCommAbort(comm));
    done.store(true);
    other.join();
    CHILD_CHECK(gpusimNcclViolationCount() >= 1);
    CHILD_CHECK(std::strstr(gpusimNcclLastViolation(), "ncclCommGetAsyncError") != nullptr &&
                    std::strstr(gpusimNcclLastViolation(), "another thread") != nullptr,
                "%s", gpusimNcclLastViolation());
    // After the abort returned: the handle is a tombstone, not freed memory.
    uint64_t before = gpusimNcclViolationCount();
    CHILD_CHECK(ncclCommCount(comm, &n) == ncclInvalidArgument);
    CHILD_CHECK(gpusimNcclViolationCount() == before + 1);
    CHILD_CHECK(std::strstr(gpusimNcclLastViolation(), "after ncclCommDestroy or ncclCommAbort") != nullptr,
                "%s", gpusimNcclLastViolation());
    // The same for destroy.
    ncclComm_t second;
    CHILD_NCCL(ncclCommInitRank(&second, 1, NewId(), 0));
    CHILD_NCCL(ncclCommDestroy(second));
    CHILD_CHECK(ncclCommGetAsyncError(second, &st) == ncclInvalidArgument);
    CHILD_CHECK(gpusimNcclViolationCount() == before + 2);
  });
  ExpectAllOk(out);
}

// GPUSIM_NCCL_VIOLATION_ABORT=1 turns the first violation into abort(), so a run that makes
// one cannot pass unnoticed.
TEST_F(Faults, ViolationAbortsTheProcessWhenAskedTo) {
  auto out = RunRanks(1, 30, [&](int) {
    setenv("GPUSIM_NCCL_VIOLATION_ABORT", "1", 1);
    ncclComm_t comm;
    CHILD_NCCL(ncclCommInitRank(&comm, 1, NewId(), 0));
    CHILD_NCCL(ncclCommDestroy(comm));
    int n;
    (void)ncclCommCount(comm, &n);
  });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], 128 + SIGABRT);
}

// Nonblocking work stays ncclInProgress for GPUSIM_NCCL_LAUNCH_DELAY_MS (an interposer polling
// ncclCommGetAsyncError can then be caught racing an abort); an abort ends the wait.
TEST_F(Faults, LaunchDelayKeepsNonblockingWorkInProgressUntilAnAbort) {
  auto out = RunRanks(1, 30, [&](int) {
    setenv("GPUSIM_NCCL_LAUNCH_DELAY_MS", "20000", 1);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm;
    ncclResult_t r = ncclCommInitRankConfig(&comm, 1, NewId(), 0, &config);
    CHILD_CHECK(r == ncclSuccess || r == ncclInProgress);
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) CHILD_NCCL(ncclCommGetAsyncError(comm, &st));
    CHILD_CHECK(st == ncclSuccess);
    cudaStream_t s;
    CHILD_CUDA(cudaStreamCreate(&s));
    float x = 1, y = 0;
    CHILD_CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, s) == ncclInProgress);
    usleep(100 * 1000);
    CHILD_NCCL(ncclCommGetAsyncError(comm, &st));
    CHILD_CHECK(st == ncclInProgress);
    double t = NowS();
    CHILD_NCCL(ncclCommAbort(comm));
    CHILD_CUDA(cudaStreamSynchronize(s));
    CHILD_CHECK(NowS() - t < 5.0);
    CHILD_CHECK(gpusimNcclViolationCount() == 0);
  });
  ExpectAllOk(out);
}

}  // namespace
}  // namespace gpusim_test

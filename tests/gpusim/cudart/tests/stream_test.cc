// Streams: asynchronous in-order execution on a worker, blocking host functions that stall
// nothing else, the legacy stream's implicit synchronisation, the per-thread default stream.
#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace gpusim_test {
namespace {

struct Recorder {
  std::mutex mu;
  std::vector<int> order;
};
struct Step {
  Recorder* rec;
  int index;
  static void CUDART_CB Fn(void* p) {
    auto* s = static_cast<Step*>(p);
    std::lock_guard<std::mutex> lk(s->rec->mu);
    s->rec->order.push_back(s->index);
  }
};

TEST(Stream, RunsWorkAsynchronouslyAndInOrder) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Gate gate;
  Recorder rec;
  std::vector<Step> steps(200);
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  for (int i = 0; i < 200; ++i) {
    steps[i] = {&rec, i};
    ASSERT_EQ(cudaLaunchHostFunc(s, Step::Fn, &steps[i]), cudaSuccess);
  }
  // Everything was queued while the worker is held: nothing ran on this thread.
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  {
    std::lock_guard<std::mutex> lk(rec.mu);
    EXPECT_TRUE(rec.order.empty());
  }
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  ASSERT_EQ(rec.order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(rec.order[i], i);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(Stream, CopiesAndSetsRunInStreamOrder) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* d;
  ASSERT_EQ(cudaMalloc(&d, 64 * sizeof(int)), cudaSuccess);
  std::vector<int> src(64, 7), dst(64, 0);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, 64 * sizeof(int), s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, src.data(), 32 * sizeof(int), cudaMemcpyHostToDevice, s),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dst.data(), d, 64 * sizeof(int), cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(dst[0], 0);  // still held behind the gate
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(dst[i], i < 32 ? 7 : 0) << i;
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(Stream, BlockedHostFunctionStallsNoOtherApiCall) {
  cudaStream_t hung, other;
  ASSERT_EQ(cudaStreamCreate(&hung), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(hung, Gate::Fn, &gate), cudaSuccess);
  auto t0 = std::chrono::steady_clock::now();
  // What a watchdog or an interposer's poller does while a collective hangs.
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(ev, hung), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(hung), cudaErrorNotReady);
  void* p;
  EXPECT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
  Flag ran;
  EXPECT_EQ(cudaLaunchHostFunc(other, Flag::Set, &ran), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  EXPECT_EQ(ran.value.load(), 1);
  EXPECT_LT(MsSince(t0), 2000.0);
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady);
  gate.Open();
  EXPECT_EQ(cudaEventSynchronize(ev), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaSuccess);
  cudaEventDestroy(ev);
  cudaStreamDestroy(hung);
  cudaStreamDestroy(other);
}

TEST(Stream, SynchronizeBlocksOnlyTheCaller) {
  cudaStream_t hung, other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&hung, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(hung, Gate::Fn, &gate), cudaSuccess);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    EXPECT_EQ(cudaStreamSynchronize(hung), cudaSuccess);
    returned = true;
  });
  for (int i = 0; i < 20; ++i) {
    Flag f;
    ASSERT_EQ(cudaLaunchHostFunc(other, Flag::Set, &f), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
    EXPECT_EQ(f.value.load(), 1);
  }
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(returned.load());
  gate.Open();
  waiter.join();
  EXPECT_TRUE(returned.load());
  cudaStreamDestroy(hung);
  cudaStreamDestroy(other);
}

TEST(Stream, LegacyStreamWaitsForBlockingStreamsOnly) {
  cudaStream_t blocking, nonblocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
  Gate hold_nonblocking;
  ASSERT_EQ(cudaLaunchHostFunc(nonblocking, Gate::Fn, &hold_nonblocking), cudaSuccess);
  // A non-blocking stream's pending work does not hold the legacy stream.
  Flag first;
  ASSERT_EQ(cudaLaunchHostFunc(0, Flag::Set, &first), cudaSuccess);
  EXPECT_TRUE(first.WaitSet());
  EXPECT_EQ(cudaStreamSynchronize(0), cudaSuccess);

  // A blocking stream's pending work does.
  Gate hold_blocking;
  ASSERT_EQ(cudaLaunchHostFunc(blocking, Gate::Fn, &hold_blocking), cudaSuccess);
  Flag second;
  ASSERT_EQ(cudaLaunchHostFunc(cudaStreamLegacy, Flag::Set, &second), cudaSuccess);
  EXPECT_FALSE(second.WaitSet(50ms));
  EXPECT_EQ(cudaStreamQuery(0), cudaErrorNotReady);
  hold_blocking.Open();
  EXPECT_EQ(cudaStreamSynchronize(0), cudaSuccess);
  EXPECT_EQ(second.value.load(), 1);
  hold_nonblocking.Open();
  EXPECT_EQ(cudaStreamSynchronize(nonblocking), cudaSuccess);
  cudaStreamDestroy(blocking);
  cudaStreamDestroy(nonblocking);
}

TEST(Stream, BlockingStreamWaitsForPriorLegacyWork) {
  cudaStream_t blocking, nonblocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
  Gate hold_legacy;
  ASSERT_EQ(cudaLaunchHostFunc(0, Gate::Fn, &hold_legacy), cudaSuccess);
  Flag on_blocking, on_nonblocking;
  ASSERT_EQ(cudaLaunchHostFunc(blocking, Flag::Set, &on_blocking), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(nonblocking, Flag::Set, &on_nonblocking), cudaSuccess);
  EXPECT_TRUE(on_nonblocking.WaitSet());
  EXPECT_FALSE(on_blocking.WaitSet(50ms));
  hold_legacy.Open();
  EXPECT_EQ(cudaStreamSynchronize(blocking), cudaSuccess);
  EXPECT_EQ(on_blocking.value.load(), 1);
  cudaStreamDestroy(blocking);
  cudaStreamDestroy(nonblocking);
}

TEST(Stream, SynchronousMemcpyOrdersAfterLegacyWork) {
  int src = 0, dst = -1;
  struct Late {
    static void CUDART_CB Fn(void* p) {
      std::this_thread::sleep_for(30ms);
      *static_cast<int*>(p) = 42;
    }
  };
  ASSERT_EQ(cudaLaunchHostFunc(0, Late::Fn, &src), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&dst, &src, sizeof src, cudaMemcpyHostToHost), cudaSuccess);
  EXPECT_EQ(dst, 42);
}

TEST(Stream, DestroyReturnsAtOnceAndPendingWorkStillRuns) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Gate gate;
  Flag after;
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, Flag::Set, &after), cudaSuccess);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_LT(MsSince(t0), 500.0);
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  gate.Open();
  EXPECT_TRUE(after.WaitSet());
}

TEST(Stream, CallbacksFlagsAndPriorities) {
  int least = 1, greatest = 1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, -3), cudaSuccess);
  int prio = 0;
  unsigned flags = 0;
  EXPECT_EQ(cudaStreamGetPriority(s, &prio), cudaSuccess);
  EXPECT_EQ(prio, -3);
  EXPECT_EQ(cudaStreamGetFlags(s, &flags), cudaSuccess);
  EXPECT_EQ(flags, static_cast<unsigned>(cudaStreamNonBlocking));
  struct Seen {
    cudaStream_t stream = nullptr;
    cudaError_t status = cudaErrorUnknown;
    static void CUDART_CB Fn(cudaStream_t st, cudaError_t e, void* p) {
      static_cast<Seen*>(p)->stream = st;
      static_cast<Seen*>(p)->status = e;
    }
  } seen;
  ASSERT_EQ(cudaStreamAddCallback(s, Seen::Fn, &seen, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamAddCallback(s, Seen::Fn, &seen, 1), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(seen.stream, s);
  EXPECT_EQ(seen.status, cudaSuccess);
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, 0x10), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST(Stream, PerThreadDefaultStreamsAreIndependent) {
  // Thread A holds its per-thread stream; thread B's per-thread stream is unaffected, and the
  // _ptsz entry points treat stream 0 as the calling thread's per-thread stream.
  Gate gate;
  std::atomic<int> a_query{-1};
  std::thread a([&] {
    ASSERT_EQ(cudaLaunchHostFunc_ptsz(0, Gate::Fn, &gate), cudaSuccess);
    a_query = cudaStreamQuery(cudaStreamPerThread);
  });
  a.join();
  EXPECT_EQ(a_query.load(), cudaErrorNotReady);
  Flag b_ran;
  std::thread b([&] {
    EXPECT_EQ(cudaLaunchHostFunc_ptsz(0, Flag::Set, &b_ran), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize_ptsz(0), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery_ptsz(0), cudaSuccess);
  });
  b.join();
  EXPECT_EQ(b_ran.value.load(), 1);
  // A per-thread stream is a blocking stream: the legacy stream waits for it (thread A has
  // exited; its stream was destroyed but its pending work still runs and still counts).
  Flag legacy_ran;
  ASSERT_EQ(cudaLaunchHostFunc(0, Flag::Set, &legacy_ran), cudaSuccess);
  EXPECT_FALSE(legacy_ran.WaitSet(50ms));
  gate.Open();
  EXPECT_EQ(cudaStreamSynchronize(0), cudaSuccess);
  EXPECT_EQ(legacy_ran.value.load(), 1);
}

TEST(Stream, DeviceSynchronizeWaitsForEveryStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  struct Slow {
    static void CUDART_CB Fn(void* p) {
      std::this_thread::sleep_for(30ms);
      static_cast<Flag*>(p)->value = 1;
    }
  };
  Flag done;
  ASSERT_EQ(cudaLaunchHostFunc(s, Slow::Fn, &done), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(done.value.load(), 1);
  cudaStreamDestroy(s);
}

TEST(Stream, HostFunctionsMayNotMakeBlockingCalls) {
  // CUDA forbids CUDA calls in host functions; the blocking ones would wait for the very
  // stream running them, so they answer cudaErrorNotPermitted instead of deadlocking.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  struct Ctx {
    cudaStream_t s;
    cudaError_t own = cudaSuccess, device = cudaSuccess, copy = cudaSuccess;
    static void CUDART_CB Fn(void* p) {
      auto* c = static_cast<Ctx*>(p);
      int a = 0, b = 0;
      c->own = cudaStreamSynchronize(c->s);
      c->device = cudaDeviceSynchronize();
      c->copy = cudaMemcpy(&a, &b, sizeof a, cudaMemcpyHostToHost);
    }
  } ctx{s};
  ASSERT_EQ(cudaLaunchHostFunc(s, Ctx::Fn, &ctx), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(ctx.own, cudaErrorNotPermitted);
  EXPECT_EQ(ctx.device, cudaErrorNotPermitted);
  EXPECT_EQ(ctx.copy, cudaErrorNotPermitted);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace gpusim_test

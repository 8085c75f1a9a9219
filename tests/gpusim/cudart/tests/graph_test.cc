// Stream capture and graph replay.
#include <gtest/gtest.h>

#include "test_util.h"

namespace gpusim_test {
namespace {

struct Counter {
  std::atomic<int> n{0};
  static void CUDART_CB Inc(void* p) { ++static_cast<Counter*>(p)->n; }
};

TEST(Graph, CapturedWorkRunsOnlyWhenLaunchedAndOncePerLaunch) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int* d;
  ASSERT_EQ(cudaMalloc(&d, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // s is non-blocking: order by hand
  int host = 0;
  Counter counter;
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaLaunchHostFunc(s, Counter::Inc, &counter), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(d, 0x01, sizeof(int), s), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(&host, d, sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  EXPECT_EQ(cudaLaunchHostFunc(s, Counter::Inc, &counter), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  size_t nodes = 0;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 5u);

  // Capture executed nothing.
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(counter.n.load(), 0);
  EXPECT_EQ(host, 0);

  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  // The captured record is a real record at each launch: not ready until replayed.
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady);
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(counter.n.load(), 8);
  EXPECT_EQ(host, 0x01010101);
  EXPECT_EQ(cudaEventQuery(ev), cudaSuccess);

  // Destroying the graph and the exec leaves queued launches intact.
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(counter.n.load(), 10);
  cudaEventDestroy(ev);
  cudaFree(d);
  cudaStreamDestroy(s);
}

TEST(Graph, CaptureStatusQueries) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot capture

  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  unsigned long long id = 0;
  cudaGraph_t g = nullptr;
  size_t ndeps = 99;
  EXPECT_EQ(cudaStreamGetCaptureInfo(s, &status, &id, &g, nullptr, nullptr, &ndeps), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_NE(id, 0u);
  EXPECT_NE(g, nullptr);
  EXPECT_EQ(ndeps, 0u);
  // The legacy stream would depend on the capturing blocking stream.
  EXPECT_EQ(cudaStreamIsCapturing(0, &status), cudaErrorStreamCaptureImplicit);
  // Ending a thread-local capture from another thread is refused.
  std::thread([&] {
    cudaGraph_t other;
    EXPECT_EQ(cudaStreamEndCapture(s, &other), cudaErrorStreamCaptureWrongThread);
  }).join();
  // Synchronising a capturing stream is refused and invalidates the capture.
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaLaunchHostFunc(s, Counter::Inc, nullptr), cudaErrorStreamCaptureInvalidated);
  g = reinterpret_cast<cudaGraph_t>(1);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaStreamIsCapturing(0, &status), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorIllegalState);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST(Graph, CapturingStreamRefusesSynchronousWorkAndCrossStreamJoins) {
  cudaStream_t s, other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorCapturedEvent);
  EXPECT_EQ(cudaStreamWaitEvent(other, ev, 0), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamWaitEvent(s, ev, 0), cudaSuccess);  // same capture: already ordered
  cudaGraph_t g;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaSuccess);  // a replayed record is an ordinary one
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaEventDestroy(ev);
  cudaGetLastError();
  cudaStreamDestroy(s);
  cudaStreamDestroy(other);
}

TEST(Graph, EmptyGraphAndBadHandles) {
  cudaGraph_t g;
  ASSERT_EQ(cudaGraphCreate(&g, 0), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(0), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(nullptr, 0), cudaErrorInvalidValue);
  cudaGetLastError();
}

// CUDA's capture-mode rule (cudaStreamBeginCapture, cudaThreadExchangeStreamCaptureMode): a
// "potentially unsafe" call (here cudaEventQuery, cudaMalloc) is refused, and invalidates the
// capture, when another thread captures in global mode and the caller's mode is global, or
// when the caller itself captures in a non-relaxed mode. Relaxed callers are never refused.
cudaError_t QueryOnAnotherThread(cudaEvent_t ev, cudaStreamCaptureMode mode) {
  cudaError_t result = cudaErrorUnknown;
  std::thread([&] {
    cudaStreamCaptureMode m = mode;
    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) return;
    result = cudaEventQuery(ev);
    cudaGetLastError();
  }).join();
  return result;
}

TEST(Graph, UnsafeCallsFollowTheCaptureModeRule) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t ev;  // recorded and reached outside any capture
  ASSERT_EQ(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  Counter counter;
  struct Case {
    cudaStreamCaptureMode capture;  // of the capturing (this) thread
    cudaStreamCaptureMode other;    // the querying thread's mode
    bool refused;
  };
  const Case cases[] = {
      {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeGlobal, true},
      {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, false},
      {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed, false},
      {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal, false},
      {cudaStreamCaptureModeRelaxed, cudaStreamCaptureModeGlobal, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "capture mode " << c.capture << ", other thread " << c.other);
    ASSERT_EQ(cudaStreamBeginCapture(s, c.capture), cudaSuccess);
    EXPECT_EQ(cudaLaunchHostFunc(s, Counter::Inc, &counter), cudaSuccess);
    EXPECT_EQ(QueryOnAnotherThread(ev, c.other),
              c.refused ? cudaErrorStreamCaptureUnsupported : cudaSuccess);
    cudaStreamCaptureStatus status;
    ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
    EXPECT_EQ(status, c.refused ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive);
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &g), c.refused ? cudaErrorStreamCaptureInvalidated : cudaSuccess);
    if (g != nullptr) cudaGraphDestroy(g);
    cudaGetLastError();
  }
  // No capture in progress: nothing is refused.
  EXPECT_EQ(QueryOnAnotherThread(ev, cudaStreamCaptureModeGlobal), cudaSuccess);

  // The capturing thread itself: refused in a global or thread-local capture, unless the
  // thread switched itself to relaxed; a relaxed capture refuses nothing.
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    ASSERT_EQ(cudaStreamBeginCapture(s, mode), cudaSuccess);
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&relaxed), cudaSuccess);
    EXPECT_EQ(relaxed, cudaStreamCaptureModeGlobal);  // the previous mode comes back
    EXPECT_EQ(cudaEventQuery(ev), cudaSuccess);
    ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&relaxed), cudaSuccess);
    cudaGraph_t g = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    cudaGetLastError();
  }
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphDestroy(g);
  cudaStreamCaptureMode bad = static_cast<cudaStreamCaptureMode>(7);
  EXPECT_EQ(cudaThreadExchangeStreamCaptureMode(&bad), cudaErrorInvalidValue);
  EXPECT_EQ(counter.n.load(), 0);  // nothing captured ever ran
  cudaGetLastError();
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace gpusim_test

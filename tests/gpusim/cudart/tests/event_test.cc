// Events: not ready until the stream reaches them, timing from the worker's clock, waits
// across streams, re-recording.
#include <gtest/gtest.h>

#include "test_util.h"

namespace gpusim_test {
namespace {

void CUDART_CB Sleep20ms(void*) { std::this_thread::sleep_for(20ms); }

TEST(Event, NotReadyUntilTheStreamReachesIt) {
  cudaStream_t s;
  cudaEvent_t ev;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaSuccess);  // never recorded: complete, as in CUDA
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // "not ready" is not an error
  gate.Open();
  EXPECT_EQ(cudaEventSynchronize(ev), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(ev), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(Event, ElapsedTimeMeasuresTheWorkBetweenRecords) {
  cudaStream_t s;
  cudaEvent_t a, b, untimed;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);  // not recorded
  Gate gate;
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, Sleep20ms, nullptr), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, s), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
  // The worker stamps `a` when it passes it, which a loaded machine can delay: the 30 ms at
  // the gate count from then, not from the record call.
  ASSERT_EQ(cudaEventSynchronize(a), cudaSuccess);
  std::this_thread::sleep_for(30ms);
  gate.Open();
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  // 30 ms held at the gate + 20 ms of work, measured where the worker passed each record.
  EXPECT_GE(ms, 45.0f);
  EXPECT_LT(ms, 2000.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, untimed), cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  for (cudaEvent_t e : {a, b, untimed}) cudaEventDestroy(e);
  cudaStreamDestroy(s);
}

TEST(Event, StreamWaitEventHoldsAnotherStream) {
  cudaStream_t producer, consumer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
  Gate gate;
  Flag consumed;
  ASSERT_EQ(cudaLaunchHostFunc(producer, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, producer), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(consumer, ev, 0), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(consumer, Flag::Set, &consumed), cudaSuccess);
  // Re-recording after the wait was queued does not change what the consumer waits for.
  ASSERT_EQ(cudaEventRecord(ev, consumer), cudaSuccess);
  EXPECT_FALSE(consumed.WaitSet(50ms));
  EXPECT_EQ(cudaStreamQuery(consumer), cudaErrorNotReady);
  gate.Open();
  EXPECT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  EXPECT_EQ(consumed.value.load(), 1);
  cudaEventDestroy(ev);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
}

TEST(Event, ReRecordedEventRefersToItsNewestRecord) {
  cudaStream_t fast, held;
  ASSERT_EQ(cudaStreamCreateWithFlags(&fast, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, fast), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(ev), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(held, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, held), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorNotReady);
  gate.Open();
  EXPECT_EQ(cudaEventSynchronize(ev), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaSuccess);
  cudaEventDestroy(ev);
  cudaStreamDestroy(fast);
  cudaStreamDestroy(held);
}

TEST(Event, DestroyedEventWithPendingRecordIsSafe) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t ev;
  ASSERT_EQ(cudaEventCreate(&ev), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ev, s), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(ev), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(ev), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  gate.Open();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
}

TEST(Event, InterprocessEventsAreNotSimulated) {
  cudaEvent_t ev;
  EXPECT_EQ(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming),
            cudaErrorNotSupported);
  EXPECT_EQ(cudaEventCreateWithFlags(&ev, 0x100), cudaErrorInvalidValue);
  cudaGetLastError();
}

}  // namespace
}  // namespace gpusim_test

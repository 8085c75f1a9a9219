// A CUDA program as a user writes it, built by nvcc against the real headers and linked
// against the real libcudart.so.13; run with LD_LIBRARY_PATH pointing at gpusim. Its kernels
// get CPU bodies from the test kernel library (GPUSIM_KERNEL_LIBS). Built twice: with the
// legacy default stream (launches go through __cudaLaunchKernel) and with
// --default-stream per-thread (__cudaLaunchKernel_ptsz and the _ptsz/_ptds API).
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

__global__ void addone(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

namespace ns {
template <typename T>
__global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
}  // namespace ns

// No CPU body is registered for this one: on gpusim it only takes time.
__global__ void nobody(int* p) { *p = 1; }

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)
#define EXPECT(cond)                                                    \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

static std::atomic<bool> g_release{false};
static void CUDART_CB Hold(void*) {
  while (!g_release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

static int CheckValues(const float* d, int n, float want_offset, float factor) {
  std::vector<float> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    float want = (i + want_offset) * factor;
    if (h[i] != want) {
      fprintf(stderr, "x[%d] = %g, want %g\n", i, h[i], want);
      return 1;
    }
  }
  return 0;
}

int main() {
  const int n = 1000;
  const int blocks = (n + 255) / 256;
  float* x;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  std::vector<float> h(n);
  for (int i = 0; i < n; ++i) h[i] = static_cast<float>(i);
  CHECK(cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  // <<<>>> on the default stream, then on a created stream.
  addone<<<blocks, 256>>>(x, n);
  CHECK(cudaGetLastError());
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaDeviceSynchronize());
  ns::scale<float><<<blocks, 256, 0, s>>>(x, 2.0f, n);
  CHECK(cudaStreamSynchronize(s));
  if (CheckValues(x, n, 1.0f, 2.0f)) return 1;

  // Capture one launch into a graph and replay it three times.
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  addone<<<blocks, 256, 0, s>>>(x, n);
  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(s, &status));
  EXPECT(status == cudaStreamCaptureStatusActive);
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaStreamSynchronize(s));
  if (CheckValues(x, n, 1.0f, 2.0f)) return 1;  // capture ran nothing
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  if (CheckValues(x, n, 2.5f, 2.0f)) return 1;  // (i + 1) * 2 + 3 == (i + 2.5) * 2
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));

  // A kernel without a CPU body runs (takes time) and touches nothing.
  int* flag;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMemset(flag, 0, sizeof(int)));
  nobody<<<1, 1>>>(flag);
  CHECK(cudaGetLastError());
  int seen = -1;
  CHECK(cudaMemcpy(&seen, flag, sizeof seen, cudaMemcpyDeviceToHost));
  EXPECT(seen == 0);

  // Errors come back through cudaGetLastError as on a GPU.
  addone<<<1, 2048>>>(x, n);
  EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration);
  EXPECT(cudaGetLastError() == cudaSuccess);

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
  // Per-thread default streams: another thread holds its stream 0 in a host function; this
  // thread's stream 0 is a different stream and completes. (With the legacy default stream
  // this would wait for the held one: the legacy stream waits for blocking streams.)
  std::thread holder([] { cudaLaunchHostFunc(0, Hold, nullptr); });
  holder.join();
  addone<<<blocks, 256>>>(x, n);
  CHECK(cudaStreamSynchronize(0));
  // The legacy stream, named explicitly, still waits for that blocking stream.
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CHECK(cudaEventRecord(ev, cudaStreamLegacy));
  EXPECT(cudaEventQuery(ev) == cudaErrorNotReady);
  g_release = true;
  CHECK(cudaEventSynchronize(ev));
  CHECK(cudaEventDestroy(ev));
  std::vector<float> back(n);
  CHECK(cudaMemcpy(back.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT(back[10] == (10 + 2.5f) * 2.0f + 1.0f);
  puts("probe ok (per-thread default stream)");
#else
  (void)Hold;
  puts("probe ok (legacy default stream)");
#endif
  CHECK(cudaFree(flag));
  // A copy from memory already freed is refused, not run.
  EXPECT(cudaMemcpy(&seen, flag, sizeof seen, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaFree(x));
  CHECK(cudaStreamDestroy(s));
  return 0;
}

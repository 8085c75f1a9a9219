// Kernel launches: registration as nvcc's generated code does it, CPU bodies from the test
// kernel library (GPUSIM_KERNEL_LIBS), matching by name, argument copies, default duration.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_util.h"

namespace gpusim_test {
namespace {

// Host stubs: distinct objects stand in for nvcc's stub functions (only the address matters).
char stub_fill, stub_addone, stub_scale, stub_nobody, stub_bump, stub_unregistered;
int device_var[4];

// What nvcc's module constructor does for this "translation unit".
void** Module() {
  static void** handle = [] {
    static int fatbin;
    void** h = __cudaRegisterFatBinary(&fatbin);
    auto reg = [h](const void* stub, const char* name) {
      __cudaRegisterFunction(h, static_cast<const char*>(stub), const_cast<char*>(name), name, -1,
                             nullptr, nullptr, nullptr, nullptr, nullptr);
    };
    reg(&stub_fill, "_Z4fillPiii");                 // body registered under this exact name
    reg(&stub_addone, "_Z6addonePfi");              // body registered as "addone"
    reg(&stub_scale, "_ZN2ns5scaleIfEEvPT_S1_i");   // body registered as "ns::scale"
    reg(&stub_nobody, "_Z6nobodyPi");               // no body anywhere
    reg(&stub_bump, "_Z4bumpPi");                   // body registered as "bump"
    __cudaRegisterVar(h, reinterpret_cast<char*>(device_var), nullptr, "device_var", 0,
                      sizeof device_var, 0, 0);
    __cudaRegisterFatBinaryEnd(h);
    return h;
  }();
  return handle;
}

TEST(Launch, BodyMatchedByExactMangledNameSeesTheLaunch) {
  Module();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  std::vector<int> out(8 + 3 + 2, -1);
  int* ptr = out.data();
  int value = 5, n = 8;
  void* args[] = {&ptr, &value, &n};
  ASSERT_EQ(cudaLaunchKernel(&stub_fill, dim3(3), dim3(64), args, 128, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < n; ++i) EXPECT_EQ(out[i], 5);
  EXPECT_EQ(out[8], 3);     // grid.x
  EXPECT_EQ(out[9], 64);    // block.x
  EXPECT_EQ(out[10], 128);  // shared memory bytes
  void* seen_stream;
  std::memcpy(&seen_stream, &out[11], sizeof seen_stream);
  EXPECT_EQ(seen_stream, static_cast<void*>(s));  // the stream as launched
  cudaStreamDestroy(s);
}

TEST(Launch, NvccPathMatchesBodiesByDemangledIdentifier) {
  Module();
  cudaKernel_t add = nullptr, scale = nullptr;
  ASSERT_EQ(__cudaGetKernel(&add, &stub_addone), cudaSuccess);
  ASSERT_EQ(__cudaGetKernel(&scale, &stub_scale), cudaSuccess);
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = static_cast<float>(i);
  float* px = x.data();
  int n = 100;
  float a = 3.0f;
  // <<<1, 128>>>: push the configuration, the stub pops it and launches.
  ASSERT_EQ(__cudaPushCallConfiguration(dim3(1), dim3(128), 0, nullptr), 0u);
  dim3 grid, block;
  size_t smem;
  cudaStream_t st;
  ASSERT_EQ(__cudaPopCallConfiguration(&grid, &block, &smem, &st), cudaSuccess);
  void* add_args[] = {&px, &n};
  ASSERT_EQ(__cudaLaunchKernel(add, grid, block, add_args, smem, st), cudaSuccess);
  void* scale_args[] = {&px, &a, &n};
  ASSERT_EQ(__cudaLaunchKernel(scale, dim3(1), dim3(128), scale_args, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(x[i], (i + 1) * 3.0f) << i;
  const char* name = nullptr;
  EXPECT_EQ(cudaFuncGetName(&name, &stub_scale), cudaSuccess);
  EXPECT_STREQ(name, "_ZN2ns5scaleIfEEvPT_S1_i");
  size_t off = 1, size = 0;
  EXPECT_EQ(cudaFuncGetParamInfo(&stub_scale, 1, &off, &size), cudaSuccess);
  EXPECT_EQ(size, sizeof(float));
}

TEST(Launch, ArgumentsAreCopiedAtLaunchTime) {
  Module();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s, Gate::Fn, &gate), cudaSuccess);
  std::vector<int> out(8 + 5, 0);
  int* ptr = out.data();
  int value = 1, n = 8;
  void* args[] = {&ptr, &value, &n};
  ASSERT_EQ(cudaLaunchKernel(&stub_fill, dim3(1), dim3(1), args, 0, s), cudaSuccess);
  value = 2;  // too late: the launch has its own copy
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(out[0], 1);
  cudaStreamDestroy(s);
}

TEST(Launch, GraphReplaysAKernelWithItsCapturedArguments) {
  Module();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int counter = 0;
  int* p = &counter;
  void* args[] = {&p};
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaLaunchKernel(&stub_bump, dim3(1), dim3(1), args, 0, s), cudaSuccess);
  cudaGraph_t g;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(counter, 0);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  // bump() clobbers its argument copy; each replay must still see the captured pointer.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(counter, 3);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

TEST(Launch, KernelWithoutBodyTakesTheDefaultDurationAndTouchesNothing) {
  Module();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t a, b;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  int untouched = 7;
  int* p = &untouched;
  void* args[] = {&p};
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(cudaLaunchKernel(&stub_nobody, dim3(1), dim3(1), args, 0, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 200 * 0.005f);  // GPUSIM_KERNEL_DEFAULT_US = 5 each
  EXPECT_LT(ms, 2000.0f);
  EXPECT_EQ(untouched, 7);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
}

TEST(Launch, UnknownFunctionAndBadConfigurationAreErrors) {
  Module();
  void* args[] = {nullptr};
  EXPECT_EQ(cudaLaunchKernel(&stub_unregistered, dim3(1), dim3(1), args, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
  cudaKernel_t k = nullptr;
  EXPECT_EQ(__cudaGetKernel(&k, &stub_unregistered), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(__cudaLaunchKernel(nullptr, dim3(1), dim3(1), args, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaLaunchKernel(&stub_nobody, dim3(0), dim3(1), args, 0, nullptr),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(&stub_nobody, dim3(1), dim3(1025), args, 0, nullptr),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaFuncAttributes attr;
  EXPECT_EQ(cudaFuncGetAttributes(&attr, &stub_nobody), cudaSuccess);
  EXPECT_EQ(attr.maxThreadsPerBlock, 1024);
  int blocks = 0;
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, &stub_nobody, 256, 0),
            cudaSuccess);
  EXPECT_EQ(blocks, 8);
}

TEST(Launch, DeviceVariablesLiveInTheirHostShadow) {
  Module();
  int v[4] = {1, 2, 3, 4}, back[4] = {};
  ASSERT_EQ(cudaMemcpyToSymbol(device_var, v, sizeof v, 0, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(device_var[3], 4);
  ASSERT_EQ(cudaMemcpyFromSymbol(back, device_var, sizeof(int), 2 * sizeof(int),
                                 cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back[0], 3);
  size_t size = 0;
  EXPECT_EQ(cudaGetSymbolSize(&size, device_var), cudaSuccess);
  EXPECT_EQ(size, sizeof device_var);
  EXPECT_EQ(cudaMemcpyToSymbol(device_var, v, sizeof v, 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyToSymbol(v, v, 4, 0, cudaMemcpyHostToDevice), cudaErrorInvalidSymbol);
  // The variable's address is device memory to a plain copy too.
  void* at = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&at, device_var), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(static_cast<int*>(at) + 1, v, sizeof(int), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(device_var[1], 1);
  cudaGetLastError();
}

}  // namespace
}  // namespace gpusim_test

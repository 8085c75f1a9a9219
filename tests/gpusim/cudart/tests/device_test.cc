// Device queries and error reporting.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "test_util.h"

namespace gpusim_test {
namespace {

TEST(Device, LooksLikeAnH100Node) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 8);  // GPUSIM_DEVICE_COUNT unset
  cudaDeviceProp p;
  ASSERT_EQ(cudaGetDeviceProperties(&p, 3), cudaSuccess);
  EXPECT_EQ(p.multiProcessorCount, 132);
  EXPECT_EQ(p.major, 9);
  EXPECT_EQ(p.minor, 0);
  EXPECT_EQ(p.warpSize, 32);
  EXPECT_EQ(p.totalGlobalMem, 80ull << 30);
  EXPECT_NE(std::string(p.name).find("H100"), std::string::npos);
  int v = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_EQ(v, 132);
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0), cudaSuccess);
  EXPECT_EQ(v, 1024);
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(v, 9);
  char bus[32];
  ASSERT_EQ(cudaDeviceGetPCIBusId(bus, sizeof bus, 1), cudaSuccess);
  EXPECT_STREQ(bus, "0000:2A:00.0");
  int back = -1;
  ASSERT_EQ(cudaDeviceGetByPCIBusId(&back, bus), cudaSuccess);
  EXPECT_EQ(back, 1);
  int version = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);
  ASSERT_EQ(cudaDriverGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);
  EXPECT_EQ(cudaGetDeviceProperties(&p, 8), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(8), cudaErrorInvalidDevice);
  cudaGetLastError();
}

TEST(Device, CurrentDeviceIsPerThread) {
  ASSERT_EQ(cudaSetDevice(5), cudaSuccess);
  int d = -1;
  std::thread([&] { EXPECT_EQ(cudaGetDevice(&d), cudaSuccess); }).join();
  EXPECT_EQ(d, 0);
  ASSERT_EQ(cudaGetDevice(&d), cudaSuccess);
  EXPECT_EQ(d, 5);
  // Streams belong to the device current at creation.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int sd = -1;
  EXPECT_EQ(cudaStreamGetDevice(s, &sd), cudaSuccess);
  EXPECT_EQ(sd, 5);
  cudaStreamDestroy(s);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(Device, LimitsFlagsAndPeers) {
  size_t v = 0;
  ASSERT_EQ(cudaDeviceSetLimit(cudaLimitStackSize, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetLimit(&v, cudaLimitStackSize), cudaSuccess);
  EXPECT_EQ(v, 4096u);
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync), cudaSuccess);
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_TRUE(flags & cudaDeviceScheduleBlockingSync);
  int can = 0;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  EXPECT_EQ(can, 1);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
  void* fn = reinterpret_cast<void*>(1);
  cudaDriverEntryPointQueryResult q;
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuInit", &fn, 13000, cudaEnableDefault, &q),
            cudaSuccess);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(q, cudaDriverEntryPointSymbolNotFound);
  cudaGetLastError();
}

TEST(Errors, LastErrorIsPerThreadAndClearedByGet) {
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  std::thread([] { EXPECT_EQ(cudaGetLastError(), cudaSuccess); }).join();
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // A newer error replaces an older one; success does not clear it.
  cudaFree(reinterpret_cast<void*>(8));
  int n;
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

TEST(Errors, NamesAndStringsAreTheRealOnes) {
  EXPECT_STREQ(cudaGetErrorName(cudaSuccess), "cudaSuccess");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorNotReady), "device not ready");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorStreamCaptureUnsupported),
               "cudaErrorStreamCaptureUnsupported");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorStreamCaptureUnsupported),
               "operation not permitted when stream is capturing");
  EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(12345)), "unrecognized error code");
}

TEST(Errors, UnsimulatedEntryPointsSayNotSupported) {
  cudaMemPool_t pool;
  EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
}

}  // namespace
}  // namespace gpusim_test

// Devices: configuration from the environment, the current device, properties and attributes
// of a plausible H100 (SXM, 80 GB), limits, flags, peer access, version queries.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime.h"

namespace gpusim {
namespace {

thread_local int t_device = 0;

constexpr size_t kTotalMem = 80ull << 30;
constexpr int kSmCount = 132;
constexpr int kSharedPerBlock = 48 << 10;
constexpr int kSharedPerBlockOptin = 227 << 10;
constexpr int kSharedPerSm = 228 << 10;
// Bus ids of the eight GPUs of a DGX H100, so PCI ids look like a real node's.
constexpr int kBusIds[8] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};

long EnvLong(const char* key, long def, long lo, long hi) {
  const char* v = getenv(key);
  if (!v || !*v) return def;
  char* end = nullptr;
  long x = strtol(v, &end, 10);
  if (*end || x < lo || x > hi) {
    Warn("%s=%s is not an integer in [%ld, %ld]; using %ld", key, v, lo, hi, def);
    return def;
  }
  return x;
}

struct DeviceState {
  size_t limits[7] = {1024, 1 << 20, 8 << 20, 2, 2048, 32, 0};
  cudaFuncCache cache = cudaFuncCachePreferNone;
};

Device* Devices() {
  static auto* d = new Device[kMaxDevices];  // leaked: workers outlive static destructors
  return d;
}
DeviceState* States() {
  static auto* s = new DeviceState[kMaxDevices];
  return s;
}

int BusId(int d) { return d < 8 ? kBusIds[d] : 0x10 + d; }

}  // namespace

const Config& GetConfig() {
  static const Config* cfg = [] {
    auto* c = new Config;
    c->device_count = static_cast<int>(EnvLong("GPUSIM_DEVICE_COUNT", 8, 0, kMaxDevices));
    c->kernel_default_us = EnvLong("GPUSIM_KERNEL_DEFAULT_US", 5, 0, 3600L * 1000 * 1000);
    if (const char* libs = getenv("GPUSIM_KERNEL_LIBS")) c->kernel_libs = libs;
    c->spin_waits = EnvLong("GPUSIM_SPIN_WAITS", 0, 0, 1) == 1;
    return c;
  }();
  return *cfg;
}

int CurrentDevice() { return t_device; }
bool ValidDevice(int d) { return d >= 0 && d < GetConfig().device_count; }
Device& GetDevice(int d) { return Devices()[d]; }
void ForEachDevice(void (*fn)(Device&)) {
  // Device 0 is usable (current by default) even when GPUSIM_DEVICE_COUNT is 0.
  int n = std::max(1, GetConfig().device_count);
  for (int i = 0; i < n; ++i) fn(Devices()[i]);
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace gpusim

using namespace gpusim;

GPUSIM_API cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return Ret(cudaErrorInvalidValue);
  *count = GetConfig().device_count;
  return *count ? cudaSuccess : Ret(cudaErrorNoDevice);
}

GPUSIM_API cudaError_t cudaSetDevice(int d) {
  if (!ValidDevice(d)) return Ret(GetConfig().device_count ? cudaErrorInvalidDevice
                                                           : cudaErrorNoDevice);
  t_device = d;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGetDevice(int* d) {
  if (!d) return Ret(cudaErrorInvalidValue);
  if (GetConfig().device_count == 0) return Ret(cudaErrorNoDevice);
  *d = t_device;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaInitDevice(int d, unsigned int, unsigned int) {
  return ValidDevice(d) ? cudaSuccess : Ret(cudaErrorInvalidDevice);
}

GPUSIM_API cudaError_t cudaChooseDevice(int* d, const cudaDeviceProp*) {
  if (!d) return Ret(cudaErrorInvalidValue);
  *d = 0;
  return GetConfig().device_count ? cudaSuccess : Ret(cudaErrorNoDevice);
}

GPUSIM_API cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (!p) return Ret(cudaErrorInvalidValue);
  if (!ValidDevice(d)) return Ret(cudaErrorInvalidDevice);
  std::memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "NVIDIA H100 80GB HBM3 (gpusim)");
  for (int i = 0; i < 16; ++i) p->uuid.bytes[i] = static_cast<char>(0x60 + i * 7 + d);
  p->totalGlobalMem = kTotalMem;
  p->sharedMemPerBlock = kSharedPerBlock;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->memPitch = 2147483647;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->totalConstMem = 65536;
  p->major = 9;
  p->minor = 0;
  p->textureAlignment = 512;
  p->texturePitchAlignment = 32;
  p->multiProcessorCount = kSmCount;
  p->canMapHostMemory = 1;
  p->surfaceAlignment = 512;
  p->concurrentKernels = 1;
  p->ECCEnabled = 1;
  p->pciBusID = BusId(d);
  p->asyncEngineCount = 3;
  p->unifiedAddressing = 1;
  p->memoryBusWidth = 5120;
  p->l2CacheSize = 50 << 20;
  p->persistingL2CacheMaxSize = 30 << 20;
  p->maxThreadsPerMultiProcessor = 2048;
  p->streamPrioritiesSupported = 1;
  p->globalL1CacheSupported = 1;
  p->localL1CacheSupported = 1;
  p->sharedMemPerMultiprocessor = kSharedPerSm;
  p->regsPerMultiprocessor = 65536;
  p->managedMemory = 1;
  p->multiGpuBoardGroupID = d;
  p->hostNativeAtomicSupported = 0;
  p->concurrentManagedAccess = 1;
  p->computePreemptionSupported = 1;
  p->canUseHostPointerForRegisteredMem = 1;
  p->cooperativeLaunch = 1;
  p->sharedMemPerBlockOptin = kSharedPerBlockOptin;
  p->maxBlocksPerMultiProcessor = 32;
  p->accessPolicyMaxWindowSize = 134213632;
  p->reservedSharedMemPerBlock = 1024;
  p->hostRegisterSupported = 1;
  p->sparseCudaArraySupported = 1;
  p->memoryPoolsSupported = 1;
  p->gpuDirectRDMASupported = 1;
  p->clusterLaunch = 1;
  p->unifiedFunctionPointers = 1;
  p->deviceNumaId = -1;
  p->hostNumaId = d < 4 ? 0 : 1;
  p->gpuPciDeviceID = 0x233010de;
  p->gpuPciSubsystemID = 0x16c110de;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int d) {
  if (!value) return Ret(cudaErrorInvalidValue);
  if (!ValidDevice(d)) return Ret(cudaErrorInvalidDevice);
  int v;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = 1024; break;
    case cudaDevAttrMaxBlockDimX: v = 1024; break;
    case cudaDevAttrMaxBlockDimY: v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: v = 64; break;
    case cudaDevAttrMaxGridDimX: v = 2147483647; break;
    case cudaDevAttrMaxGridDimY: v = 65535; break;
    case cudaDevAttrMaxGridDimZ: v = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = kSharedPerBlock; break;
    case cudaDevAttrTotalConstantMemory: v = 65536; break;
    case cudaDevAttrWarpSize: v = 32; break;
    case cudaDevAttrMaxPitch: v = 2147483647; break;
    case cudaDevAttrMaxRegistersPerBlock: v = 65536; break;
    case cudaDevAttrClockRate: v = 1980000; break;
    case cudaDevAttrTextureAlignment: v = 512; break;
    case cudaDevAttrGpuOverlap: v = 1; break;
    case cudaDevAttrMultiProcessorCount: v = kSmCount; break;
    case cudaDevAttrKernelExecTimeout: v = 0; break;
    case cudaDevAttrIntegrated: v = 0; break;
    case cudaDevAttrCanMapHostMemory: v = 1; break;
    case cudaDevAttrComputeMode: v = cudaComputeModeDefault; break;
    case cudaDevAttrSurfaceAlignment: v = 512; break;
    case cudaDevAttrConcurrentKernels: v = 1; break;
    case cudaDevAttrEccEnabled: v = 1; break;
    case cudaDevAttrPciBusId: v = BusId(d); break;
    case cudaDevAttrPciDeviceId: v = 0; break;
    case cudaDevAttrTccDriver: v = 0; break;
    case cudaDevAttrMemoryClockRate: v = 2619000; break;
    case cudaDevAttrGlobalMemoryBusWidth: v = 5120; break;
    case cudaDevAttrL2CacheSize: v = 50 << 20; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = 2048; break;
    case cudaDevAttrAsyncEngineCount: v = 3; break;
    case cudaDevAttrUnifiedAddressing: v = 1; break;
    case cudaDevAttrPciDomainId: v = 0; break;
    case cudaDevAttrTexturePitchAlignment: v = 32; break;
    case cudaDevAttrComputeCapabilityMajor: v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: v = 0; break;
    case cudaDevAttrStreamPrioritiesSupported: v = 1; break;
    case cudaDevAttrGlobalL1CacheSupported: v = 1; break;
    case cudaDevAttrLocalL1CacheSupported: v = 1; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = kSharedPerSm; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: v = 65536; break;
    case cudaDevAttrManagedMemory: v = 1; break;
    case cudaDevAttrIsMultiGpuBoard: v = 0; break;
    case cudaDevAttrMultiGpuBoardGroupID: v = d; break;
    case cudaDevAttrHostNativeAtomicSupported: v = 0; break;
    case cudaDevAttrSingleToDoublePrecisionPerfRatio: v = 2; break;
    case cudaDevAttrPageableMemoryAccess: v = 0; break;
    case cudaDevAttrConcurrentManagedAccess: v = 1; break;
    case cudaDevAttrComputePreemptionSupported: v = 1; break;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: v = 1; break;
    case cudaDevAttrCooperativeLaunch: v = 1; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = kSharedPerBlockOptin; break;
    case cudaDevAttrCanFlushRemoteWrites: v = 0; break;
    case cudaDevAttrHostRegisterSupported: v = 1; break;
    case cudaDevAttrPageableMemoryAccessUsesHostPageTables: v = 0; break;
    case cudaDevAttrDirectManagedMemAccessFromHost: v = 0; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: v = 32; break;
    case cudaDevAttrMaxPersistingL2CacheSize: v = 30 << 20; break;
    case cudaDevAttrMaxAccessPolicyWindowSize: v = 134213632; break;
    case cudaDevAttrReservedSharedMemoryPerBlock: v = 1024; break;
    case cudaDevAttrSparseCudaArraySupported: v = 1; break;
    case cudaDevAttrHostRegisterReadOnlySupported: v = 1; break;
    case cudaDevAttrTimelineSemaphoreInteropSupported: v = 1; break;
    case cudaDevAttrMemoryPoolsSupported: v = 1; break;
    case cudaDevAttrGPUDirectRDMASupported: v = 1; break;
    case cudaDevAttrGPUDirectRDMAFlushWritesOptions: v = 1; break;
    case cudaDevAttrGPUDirectRDMAWritesOrdering: v = 100; break;
    case cudaDevAttrMemoryPoolSupportedHandleTypes: v = 1; break;
    case cudaDevAttrClusterLaunch: v = 1; break;
    case cudaDevAttrDeferredMappingCudaArraySupported: v = 1; break;
    case cudaDevAttrIpcEventSupport: v = 0; break;  // interprocess events are not simulated
    case cudaDevAttrMemSyncDomainCount: v = 4; break;
    case cudaDevAttrNumaConfig: v = 0; break;
    case cudaDevAttrNumaId: v = -1; break;
    case cudaDevAttrMpsEnabled: v = 0; break;
    case cudaDevAttrHostNumaId: v = d < 4 ? 0 : 1; break;
    case cudaDevAttrGpuPciDeviceId: v = 0x233010de; break;
    case cudaDevAttrGpuPciSubsystemId: v = 0x16c110de; break;
    default:
      // Texture/surface limits and newer attributes: 0 ("not supported"), as the driver
      // answers for features a device lacks.
      v = 0;
      break;
  }
  *value = v;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceGetPCIBusId(char* buf, int len, int d) {
  if (!buf || len <= 0) return Ret(cudaErrorInvalidValue);
  if (!ValidDevice(d)) return Ret(cudaErrorInvalidDevice);
  snprintf(buf, static_cast<size_t>(len), "0000:%02X:00.0", BusId(d));
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceGetByPCIBusId(int* d, const char* id) {
  if (!d || !id) return Ret(cudaErrorInvalidValue);
  unsigned domain = 0, bus = 0, dev = 0;
  if (sscanf(id, "%x:%x:%x", &domain, &bus, &dev) != 3) return Ret(cudaErrorInvalidValue);
  for (int i = 0; i < GetConfig().device_count; ++i) {
    if (BusId(i) == static_cast<int>(bus)) {
      *d = i;
      return cudaSuccess;
    }
  }
  return Ret(cudaErrorInvalidDevice);
}

GPUSIM_API cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return Ret(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaRuntimeGetVersion(int* v) {
  if (!v) return Ret(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceReset(void) {
  // Waits for the device's work and forgets per-device settings. Allocations, streams and
  // events stay valid (the real reset frees them; nothing in ft relies on that).
  int d = CurrentDevice();
  cudaError_t e = SyncDevice(d);
  if (e != cudaSuccess) return Ret(e);
  States()[d] = DeviceState{};
  GetDevice(d).flags.store(0);
  GetDevice(d).peers.store(0);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  auto i = static_cast<size_t>(limit);
  if (i >= std::size(DeviceState{}.limits)) return Ret(cudaErrorUnsupportedLimit);
  States()[CurrentDevice()].limits[i] = value;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  if (!value) return Ret(cudaErrorInvalidValue);
  auto i = static_cast<size_t>(limit);
  if (i >= std::size(DeviceState{}.limits)) return Ret(cudaErrorUnsupportedLimit);
  *value = States()[CurrentDevice()].limits[i];
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache c) {
  States()[CurrentDevice()].cache = c;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* c) {
  if (!c) return Ret(cudaErrorInvalidValue);
  *c = States()[CurrentDevice()].cache;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  constexpr unsigned kKnown = cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax;
  if (flags & ~kKnown) return Ret(cudaErrorInvalidValue);
  GetDevice(CurrentDevice()).flags.store(flags);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (!flags) return Ret(cudaErrorInvalidValue);
  // Mapped pinned memory is always available (it is all host memory).
  *flags = GetDevice(CurrentDevice()).flags.load() | cudaDeviceMapHost;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceCanAccessPeer(int* can, int d, int peer) {
  if (!can) return Ret(cudaErrorInvalidValue);
  if (!ValidDevice(d) || !ValidDevice(peer)) return Ret(cudaErrorInvalidDevice);
  *can = d != peer;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (flags) return Ret(cudaErrorInvalidValue);
  int d = CurrentDevice();
  if (!ValidDevice(peer) || peer == d) return Ret(cudaErrorInvalidDevice);
  uint64_t bit = 1ull << peer;
  if (GetDevice(d).peers.fetch_or(bit) & bit) return Ret(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  if (!ValidDevice(peer)) return Ret(cudaErrorInvalidDevice);
  uint64_t bit = 1ull << peer;
  if (!(GetDevice(CurrentDevice()).peers.fetch_and(~bit) & bit))
    return Ret(cudaErrorPeerAccessNotEnabled);
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaDeviceGetP2PAttribute(int* value, cudaDeviceP2PAttr attr, int src,
                                                 int dst) {
  if (!value) return Ret(cudaErrorInvalidValue);
  if (!ValidDevice(src) || !ValidDevice(dst) || src == dst) return Ret(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevP2PAttrPerformanceRank: *value = 0; break;
    case cudaDevP2PAttrAccessSupported: *value = 1; break;
    case cudaDevP2PAttrNativeAtomicSupported: *value = 1; break;
    case cudaDevP2PAttrCudaArrayAccessSupported: *value = 1; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}

// There is no driver behind gpusim: every driver symbol is "not found".
static cudaError_t DriverEntryPoint(const char* symbol, void** fn,
                                    cudaDriverEntryPointQueryResult* status) {
  if (!symbol || !fn) return Ret(cudaErrorInvalidValue);
  *fn = nullptr;
  if (status) {
    *status = cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
  }
  return Ret(cudaErrorSymbolNotFound);
}

GPUSIM_API cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long,
                                               cudaDriverEntryPointQueryResult* status) {
  return DriverEntryPoint(symbol, fn, status);
}
GPUSIM_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int,
                                                        unsigned long long,
                                                        cudaDriverEntryPointQueryResult* status) {
  return DriverEntryPoint(symbol, fn, status);
}
GPUSIM_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** fn,
                                                    unsigned long long,
                                                    cudaDriverEntryPointQueryResult* status) {
  return DriverEntryPoint(symbol, fn, status);
}
GPUSIM_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** fn, unsigned int, unsigned long long,
    cudaDriverEntryPointQueryResult* status) {
  return DriverEntryPoint(symbol, fn, status);
}

GPUSIM_API cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                       cudaChannelFormatKind f) {
  return cudaChannelFormatDesc{x, y, z, w, f};
}

// Profiler control (cuda_profiler_api.h): nothing to profile, and success keeps tools quiet.
GPUSIM_API cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
GPUSIM_API cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

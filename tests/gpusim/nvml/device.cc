// Library lifetime and the device queries: each answers from the state file's current text.
#include <cstdio>
#include <cstdlib>

#include "nvml_abi.h"
#include "state.h"

using gpusim::nvml::CheckDevice;
using gpusim::nvml::Lib;
using gpusim::nvml::Mu;

namespace {

// The same eight bus ids as gpusim's cudart (tests/gpusim/cudart/device.cc), so a rank's
// cudaDeviceGetPCIBusId matches the GPU NVML names.
constexpr unsigned kBusIds[8] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
unsigned BusId(int d) { return d < 8 ? kBusIds[d] : 0x10 + static_cast<unsigned>(d); }

int DeviceCountFromEnv() {
  const char* v = getenv("GPUSIM_DEVICE_COUNT");
  if (!v || !*v) return 8;
  char* end = nullptr;
  long n = strtol(v, &end, 10);
  if (*end || n < 0 || n > gpusim::nvml::kMaxGpus) {
    fprintf(stderr, "gpusim-nvml: GPUSIM_DEVICE_COUNT=%s is not an integer in [0, 64]; using 8\n",
            v);
    return 8;
  }
  return static_cast<int>(n);
}

}  // namespace

// Reference-counted like NVML's: each nvmlInit needs its nvmlShutdown. The environment is read
// at the first one, so a test can point a fresh init at another state file.
GPUSIM_NVML_API nvmlReturn_t nvmlInit_v2(void) {
  std::lock_guard<std::mutex> lk(Mu());
  gpusim::nvml::Library& lib = Lib();
  if (lib.init_count++ == 0) {
    lib.device_count = DeviceCountFromEnv();
    const char* path = getenv("GPUSIM_NVML_STATE");
    lib.state_path = path ? path : "";
    lib.key = {};
    lib.health = {};
    gpusim::nvml::Refresh();
  }
  return NVML_SUCCESS;
}

GPUSIM_NVML_API nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

GPUSIM_NVML_API nvmlReturn_t nvmlShutdown(void) {
  std::lock_guard<std::mutex> lk(Mu());
  if (Lib().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --Lib().init_count;
  return NVML_SUCCESS;
}

GPUSIM_NVML_API const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    default: return "Unknown Error";
  }
}

GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  std::lock_guard<std::mutex> lk(Mu());
  if (Lib().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = static_cast<unsigned>(Lib().device_count);
  return NVML_SUCCESS;
}

// A lost GPU is still counted but has no handle, as nvidia-smi shows it ("Unable to determine
// the device handle for GPU ...: GPU is lost"); handles taken before it was lost stay valid and
// every query through them answers NVML_ERROR_GPU_IS_LOST.
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                           nvmlDevice_t* device) {
  std::lock_guard<std::mutex> lk(Mu());
  gpusim::nvml::Library& lib = Lib();
  if (lib.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= static_cast<unsigned>(lib.device_count))
    return NVML_ERROR_INVALID_ARGUMENT;
  int gpu = -1;
  nvmlReturn_t r = CheckDevice(gpusim::nvml::Handle(static_cast<int>(index)), &gpu);
  if (r == NVML_SUCCESS) *device = gpusim::nvml::Handle(gpu);
  return r;
}

GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  std::lock_guard<std::mutex> lk(Mu());
  int gpu = -1;
  if (nvmlReturn_t r = CheckDevice(device, &gpu); r != NVML_SUCCESS) return r;
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = {};
  pci->domain = 0;
  pci->bus = BusId(gpu);
  pci->device = 0;
  pci->pciDeviceId = 0x233010de;  // H100 SXM5 80GB, NVIDIA
  pci->pciSubSystemId = 0x16c110de;
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
  return NVML_SUCCESS;
}

// The simulated GPU has had one life: its aggregate count equals the volatile one.
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                         nvmlMemoryErrorType_t errorType,
                                                         nvmlEccCounterType_t counterType,
                                                         unsigned long long* eccCounts) {
  std::lock_guard<std::mutex> lk(Mu());
  int gpu = -1;
  if (nvmlReturn_t r = CheckDevice(device, &gpu); r != NVML_SUCCESS) return r;
  if (!eccCounts ||
      (errorType != NVML_MEMORY_ERROR_TYPE_CORRECTED &&
       errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED) ||
      (counterType != NVML_VOLATILE_ECC && counterType != NVML_AGGREGATE_ECC)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *eccCounts =
      errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? Lib().health.gpus[gpu].ecc_uncorrected : 0;
  return NVML_SUCCESS;
}

GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                                       unsigned int* uncRows,
                                                       unsigned int* isPending,
                                                       unsigned int* failureOccurred) {
  std::lock_guard<std::mutex> lk(Mu());
  int gpu = -1;
  if (nvmlReturn_t r = CheckDevice(device, &gpu); r != NVML_SUCCESS) return r;
  if (!corrRows || !uncRows || !isPending || !failureOccurred) return NVML_ERROR_INVALID_ARGUMENT;
  const gpusim::nvml::GpuHealth& g = Lib().health.gpus[gpu];
  *corrRows = 0;
  *uncRows = 0;
  *isPending = g.remap_pending ? 1 : 0;
  *failureOccurred = g.remap_failure ? 1 : 0;
  return NVML_SUCCESS;
}

// NVML's protocol: *pageCount is the room in `addresses` on entry and the number of pages on
// return; too little room answers NVML_ERROR_INSUFFICIENT_SIZE (0 asks for the count alone).
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                       nvmlPageRetirementCause_t cause,
                                                       unsigned int* pageCount,
                                                       unsigned long long* addresses) {
  std::lock_guard<std::mutex> lk(Mu());
  int gpu = -1;
  if (nvmlReturn_t r = CheckDevice(device, &gpu); r != NVML_SUCCESS) return r;
  if (!pageCount || (cause != NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR &&
                     cause != NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const unsigned n = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
                         ? Lib().health.gpus[gpu].retired_pages
                         : 0;
  const unsigned room = *pageCount;
  *pageCount = n;
  if (room < n) return NVML_ERROR_INSUFFICIENT_SIZE;
  if (n > 0 && !addresses) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < n; ++i) addresses[i] = 0x100000ull * (i + 1);
  return NVML_SUCCESS;
}

GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
    nvmlDevice_t device, unsigned long long* clocksThrottleReasons) {
  std::lock_guard<std::mutex> lk(Mu());
  int gpu = -1;
  if (nvmlReturn_t r = CheckDevice(device, &gpu); r != NVML_SUCCESS) return r;
  if (!clocksThrottleReasons) return NVML_ERROR_INVALID_ARGUMENT;
  *clocksThrottleReasons = Lib().health.gpus[gpu].throttle;
  return NVML_SUCCESS;
}

// The name drivers since 535 give the same query.
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(
    nvmlDevice_t device, unsigned long long* clocksEventReasons) {
  return nvmlDeviceGetCurrentClocksThrottleReasons(device, clocksEventReasons);
}

// 18 links per GPU (NVLink 4 of an H100 SXM); the CRC counter of the state file is the flit CRC
// count, data CRC and ECC counters stay 0.
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                                             nvmlNvLinkErrorCounter_t counter,
                                                             unsigned long long* counterValue) {
  std::lock_guard<std::mutex> lk(Mu());
  int gpu = -1;
  if (nvmlReturn_t r = CheckDevice(device, &gpu); r != NVML_SUCCESS) return r;
  if (!counterValue || link >= static_cast<unsigned>(gpusim::nvml::kLinks))
    return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned long long* c = Lib().health.gpus[gpu].nvlink[link];
  switch (counter) {
    case NVML_NVLINK_ERROR_DL_CRC_FLIT: *counterValue = c[0]; break;
    case NVML_NVLINK_ERROR_DL_REPLAY: *counterValue = c[1]; break;
    case NVML_NVLINK_ERROR_DL_RECOVERY: *counterValue = c[2]; break;
    case NVML_NVLINK_ERROR_DL_CRC_DATA:
    case NVML_NVLINK_ERROR_DL_ECC_DATA: *counterValue = 0; break;
    default: return NVML_ERROR_INVALID_ARGUMENT;
  }
  return NVML_SUCCESS;
}

GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device,
                                                            unsigned int* value) {
  std::lock_guard<std::mutex> lk(Mu());
  int gpu = -1;
  if (nvmlReturn_t r = CheckDevice(device, &gpu); r != NVML_SUCCESS) return r;
  if (!value) return NVML_ERROR_INVALID_ARGUMENT;
  *value = Lib().health.gpus[gpu].pcie_replay;
  return NVML_SUCCESS;
}

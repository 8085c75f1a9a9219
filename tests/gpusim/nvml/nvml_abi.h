// The part of NVML's public C ABI (nvml.h, driver 535+) that the stand-in implements, declared
// here because no NVML header is installed: the names, argument types and values are NVML's,
// so a program written against nvml.h loads this library unchanged. The definitions in
// device.cc and events.cc must match these declarations (the compiler checks it).
#ifndef GPUSIM_NVML_NVML_ABI_H_
#define GPUSIM_NVML_NVML_ABI_H_

#define GPUSIM_NVML_API extern "C" __attribute__((visibility("default")))

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_NVLINK_MAX_LINKS 18

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];  // "0000:3A:00.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;  // device id << 16 | vendor id
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:3A:00.0"
} nvmlPciInfo_t;

typedef enum nvmlMemoryErrorType_enum {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
} nvmlMemoryErrorType_t;

typedef enum nvmlEccCounterType_enum {
  NVML_VOLATILE_ECC = 0,
  NVML_AGGREGATE_ECC = 1,
} nvmlEccCounterType_t;

typedef enum nvmlPageRetirementCause_enum {
  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
} nvmlPageRetirementCause_t;

typedef enum nvmlNvLinkErrorCounter_enum {
  NVML_NVLINK_ERROR_DL_REPLAY = 0,
  NVML_NVLINK_ERROR_DL_RECOVERY = 1,
  NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
  NVML_NVLINK_ERROR_DL_CRC_DATA = 3,
  NVML_NVLINK_ERROR_DL_ECC_DATA = 4,
} nvmlNvLinkErrorCounter_t;

#define nvmlEventTypeXidCriticalError 0x0000000000000008LL

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

GPUSIM_NVML_API nvmlReturn_t nvmlInit_v2(void);
GPUSIM_NVML_API nvmlReturn_t nvmlInit(void);
GPUSIM_NVML_API nvmlReturn_t nvmlShutdown(void);
GPUSIM_NVML_API const char* nvmlErrorString(nvmlReturn_t result);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                           nvmlDevice_t* device);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                         nvmlMemoryErrorType_t errorType,
                                                         nvmlEccCounterType_t counterType,
                                                         unsigned long long* eccCounts);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                                       unsigned int* uncRows,
                                                       unsigned int* isPending,
                                                       unsigned int* failureOccurred);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                       nvmlPageRetirementCause_t cause,
                                                       unsigned int* pageCount,
                                                       unsigned long long* addresses);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
    nvmlDevice_t device, unsigned long long* clocksThrottleReasons);
GPUSIM_NVML_API nvmlReturn_t
nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* clocksEventReasons);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                                             nvmlNvLinkErrorCounter_t counter,
                                                             unsigned long long* counterValue);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device,
                                                            unsigned int* value);
GPUSIM_NVML_API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set);
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                      unsigned long long eventTypes,
                                                      nvmlEventSet_t set);
GPUSIM_NVML_API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                 unsigned int timeoutms);
GPUSIM_NVML_API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

#endif  // GPUSIM_NVML_NVML_ABI_H_

// ft::worker::health::NvmlApi: the NVML calls ftworker makes, as a table of function pointers
// filled by dlopen/dlsym. ft never links NVML: the driver installs libnvidia-ml.so.1 and no
// NVML header exists at build time, so the subset used is declared here with NVML's own names,
// argument types and values (nvml.h, drivers 450 and later). A host without the driver gets a
// Status saying GPU signals are not read; a library lacking an optional call leaves that entry
// null, and only the reading that needs it is skipped.
//
// A table is immutable once built, shared by every user of the same library name, and valid
// for the life of the process (the library is never dlclosed). NVML itself is thread-safe.
#ifndef FT_FTWORKER_HEALTH_NVML_API_H_
#define FT_FTWORKER_HEALTH_NVML_API_H_

#include <source_location>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ft::worker::health {

// NVML's C ABI, spelled as in nvml.h so it can be compared line by line. In a namespace: a
// translation unit that also sees the real header must not get two definitions.
namespace nvml {

enum nvmlReturn_t {  // a C enum: int-sized, as in nvml.h
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_UNKNOWN = 999,
};

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;

inline constexpr int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
inline constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;

// nvmlDeviceGetPciInfo_v3's layout.
struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];  // "0000:3B:00.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:3B:00.0"
};
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvml.h's nvmlPciInfo_t is 68 bytes");

enum nvmlMemoryErrorType_t {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
};
enum nvmlEccCounterType_t { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
enum nvmlPageRetirementCause_t {
  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
};
enum nvmlNvLinkErrorCounter_t {
  NVML_NVLINK_ERROR_DL_REPLAY = 0,
  NVML_NVLINK_ERROR_DL_RECOVERY = 1,
  NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
};

// nvmlDeviceGetCurrentClocksThrottleReasons bits that mean the GPU protects itself (heat, the
// board's power brake, an external slowdown signal); the others (idle, application clocks,
// the software power cap, sync boost) are how a healthy GPU runs.
inline constexpr unsigned long long nvmlClocksThrottleReasonHwSlowdown = 0x8;
inline constexpr unsigned long long nvmlClocksThrottleReasonSwThermalSlowdown = 0x20;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwThermalSlowdown = 0x40;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80;

inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8;

struct nvmlEventData_t {  // nvmlEventSetWait_v2's layout
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // Xid events: the Xid
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(nvmlEventData_t) == 32, "nvml.h's nvmlEventData_t (v2) is 32 bytes");

}  // namespace nvml

struct NvmlApi {
  // Required: without them no GPU can be named, and loading fails.
  nvml::nvmlReturn_t (*init_v2)();
  nvml::nvmlReturn_t (*shutdown)();
  nvml::nvmlReturn_t (*device_get_count_v2)(unsigned int* count);
  nvml::nvmlReturn_t (*device_get_handle_by_index_v2)(unsigned int index,
                                                      nvml::nvmlDevice_t* device);
  nvml::nvmlReturn_t (*device_get_pci_info_v3)(nvml::nvmlDevice_t device, nvml::nvmlPciInfo_t* pci);
  // Optional: null when the library lacks the symbol.
  const char* (*error_string)(nvml::nvmlReturn_t result);
  nvml::nvmlReturn_t (*device_get_total_ecc_errors)(nvml::nvmlDevice_t device,
                                                    nvml::nvmlMemoryErrorType_t error_type,
                                                    nvml::nvmlEccCounterType_t counter_type,
                                                    unsigned long long* count);
  nvml::nvmlReturn_t (*device_get_remapped_rows)(nvml::nvmlDevice_t device, unsigned int* corr_rows,
                                                 unsigned int* unc_rows, unsigned int* is_pending,
                                                 unsigned int* failure_occurred);
  nvml::nvmlReturn_t (*device_get_retired_pages)(nvml::nvmlDevice_t device,
                                                 nvml::nvmlPageRetirementCause_t cause,
                                                 unsigned int* page_count,
                                                 unsigned long long* addresses);
  // nvmlDeviceGetCurrentClocksThrottleReasons, or its newer name ...ClocksEventReasons.
  nvml::nvmlReturn_t (*device_get_current_clocks_throttle_reasons)(nvml::nvmlDevice_t device,
                                                                   unsigned long long* reasons);
  nvml::nvmlReturn_t (*device_get_nvlink_error_counter)(nvml::nvmlDevice_t device,
                                                        unsigned int link,
                                                        nvml::nvmlNvLinkErrorCounter_t counter,
                                                        unsigned long long* value);
  nvml::nvmlReturn_t (*device_get_pcie_replay_counter)(nvml::nvmlDevice_t device,
                                                       unsigned int* value);
  // Xid events: all four or none.
  nvml::nvmlReturn_t (*event_set_create)(nvml::nvmlEventSet_t* set);
  nvml::nvmlReturn_t (*device_register_events)(nvml::nvmlDevice_t device,
                                               unsigned long long event_types,
                                               nvml::nvmlEventSet_t set);
  nvml::nvmlReturn_t (*event_set_wait_v2)(nvml::nvmlEventSet_t set, nvml::nvmlEventData_t* data,
                                          unsigned int timeout_ms);
  nvml::nvmlReturn_t (*event_set_free)(nvml::nvmlEventSet_t set);
};

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

// The table of `library` (a name the loader searches, or a path). Unavailable when it cannot be
// loaded, Unsupported when it lacks a required call; both messages name the library and say
// that GPU signals are not read. Built once per library name. Does not call nvmlInit.
Status LoadNvml(std::string_view library, const NvmlApi** out);

// "GPU is lost (NVML error 15)": an NVML result for messages.
std::string NvmlErrorText(const NvmlApi& api, nvml::nvmlReturn_t result);

// A failed NVML call as a Status: "nvmlInit_v2: Driver Not Loaded (NVML error 9)", coded by
// what the caller can do (a missing driver is Unavailable, an unsupported call Unsupported).
Status NvmlStatus(const NvmlApi& api, nvml::nvmlReturn_t result, std::string_view call,
                  std::source_location where = std::source_location::current());

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_NVML_API_H_

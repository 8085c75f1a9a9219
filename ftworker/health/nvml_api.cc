#include "ftworker/health/nvml_api.h"

#include <dlfcn.h>

#include <map>
#include <memory>

#include <fmt/format.h>

#include "common/mutex.h"

namespace ft::worker::health {
namespace {

using nvml::nvmlReturn_t;

template <typename Fn>
void Optional(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
}

template <typename Fn>
Status Required(void* handle, std::string_view library, const char* name, Fn* out) {
  Optional(handle, name, out);
  if (*out == nullptr) {
    return Status::Unsupported(fmt::format(
        "NVML not usable: {} lacks {} (a driver older than 450, or not NVML); GPU signals are not "
        "read",
        library, name));
  }
  return Status::Ok();
}

Status Build(std::string_view library, NvmlApi* api) {
  std::string name(library);
  // RTLD_LOCAL: NVML's symbols must not satisfy anyone else's lookups in the daemon.
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status::Unavailable(fmt::format(
        "NVML not loaded: {}; GPU signals are not read (install the NVIDIA driver, or set "
        "FT_NVML_LIBRARY to its libnvidia-ml.so.1)",
        why ? std::string(why) : name));
  }
  // Never dlclosed: the table is shared for the life of the process, and a reload would lose
  // NVML's reference count of nvmlInit calls.
  FT_RETURN_IF_ERROR(Required(handle, name, "nvmlInit_v2", &api->init_v2));
  FT_RETURN_IF_ERROR(Required(handle, name, "nvmlShutdown", &api->shutdown));
  FT_RETURN_IF_ERROR(Required(handle, name, "nvmlDeviceGetCount_v2", &api->device_get_count_v2));
  FT_RETURN_IF_ERROR(
      Required(handle, name, "nvmlDeviceGetHandleByIndex_v2", &api->device_get_handle_by_index_v2));
  FT_RETURN_IF_ERROR(
      Required(handle, name, "nvmlDeviceGetPciInfo_v3", &api->device_get_pci_info_v3));
  Optional(handle, "nvmlErrorString", &api->error_string);
  Optional(handle, "nvmlDeviceGetTotalEccErrors", &api->device_get_total_ecc_errors);
  Optional(handle, "nvmlDeviceGetRemappedRows", &api->device_get_remapped_rows);
  Optional(handle, "nvmlDeviceGetRetiredPages", &api->device_get_retired_pages);
  // Drivers since 535 call it "event reasons"; both names take the same arguments.
  Optional(handle, "nvmlDeviceGetCurrentClocksEventReasons",
           &api->device_get_current_clocks_throttle_reasons);
  if (api->device_get_current_clocks_throttle_reasons == nullptr) {
    Optional(handle, "nvmlDeviceGetCurrentClocksThrottleReasons",
             &api->device_get_current_clocks_throttle_reasons);
  }
  Optional(handle, "nvmlDeviceGetNvLinkErrorCounter", &api->device_get_nvlink_error_counter);
  Optional(handle, "nvmlDeviceGetPcieReplayCounter", &api->device_get_pcie_replay_counter);
  Optional(handle, "nvmlEventSetCreate", &api->event_set_create);
  Optional(handle, "nvmlDeviceRegisterEvents", &api->device_register_events);
  Optional(handle, "nvmlEventSetWait_v2", &api->event_set_wait_v2);
  Optional(handle, "nvmlEventSetFree", &api->event_set_free);
  if (!api->event_set_create || !api->device_register_events || !api->event_set_wait_v2 ||
      !api->event_set_free) {
    api->event_set_create = nullptr;  // half a set of event calls cannot be used
    api->device_register_events = nullptr;
    api->event_set_wait_v2 = nullptr;
    api->event_set_free = nullptr;
  }
  return Status::Ok();
}

}  // namespace

Status LoadNvml(std::string_view library, const NvmlApi** out) {
  static Mutex mutex;
  static std::map<std::string, std::unique_ptr<NvmlApi>, std::less<>> loaded;
  MutexLock lock(&mutex);
  auto it = loaded.find(library);
  if (it == loaded.end()) {
    auto api = std::make_unique<NvmlApi>();
    FT_RETURN_IF_ERROR(Build(library, api.get()));
    it = loaded.emplace(std::string(library), std::move(api)).first;
  }
  *out = it->second.get();
  return Status::Ok();
}

std::string NvmlErrorText(const NvmlApi& api, nvmlReturn_t result) {
  const char* text = api.error_string ? api.error_string(result) : nullptr;
  return fmt::format("{} (NVML error {})", text ? text : "no description",
                     static_cast<int>(result));
}

Status NvmlStatus(const NvmlApi& api, nvmlReturn_t result, std::string_view call,
                  std::source_location where) {
  std::string message = fmt::format("{}: {}", call, NvmlErrorText(api, result));
  switch (result) {
    case nvml::NVML_ERROR_DRIVER_NOT_LOADED:
    case nvml::NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case nvml::NVML_ERROR_GPU_IS_LOST: return Status::Unavailable(message, where);
    case nvml::NVML_ERROR_NOT_SUPPORTED:
    case nvml::NVML_ERROR_FUNCTION_NOT_FOUND: return Status::Unsupported(message, where);
    case nvml::NVML_ERROR_INVALID_ARGUMENT: return Status::InvalidArgument(message, where);
    case nvml::NVML_ERROR_NOT_FOUND: return Status::NotFound(message, where);
    case nvml::NVML_ERROR_TIMEOUT: return Status::Timeout(message, where);
    case nvml::NVML_ERROR_UNINITIALIZED: return Status::Internal(message, where);
    default: return Status::IoError(message, where);
  }
}

}  // namespace ft::worker::health

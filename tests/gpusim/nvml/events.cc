// Event sets: each delivers every `xid` line of the state file once, in file order, for the
// GPUs registered to it. A set keeps a cursor into the file's xid lines, so a test adds an
// event by appending a line (the lines before it stay, already delivered).
#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "nvml_abi.h"
#include "state.h"

using gpusim::nvml::CheckDevice;
using gpusim::nvml::Lib;
using gpusim::nvml::Mu;

struct nvmlEventSet_st {
  unsigned long long registered[gpusim::nvml::kMaxGpus] = {};  // event types per GPU
  size_t cursor = 0;                                           // the next xid line to consider
};

namespace {

// The live sets, so a freed or foreign pointer answers NVML_ERROR_INVALID_ARGUMENT.
std::set<nvmlEventSet_t>& Sets() {  // Mu() held
  static auto* sets = new std::set<nvmlEventSet_t>;
  return *sets;
}

// Mu() held. The next undelivered Xid of a registered GPU, consuming lines of others.
bool Next(nvmlEventSet_t set, nvmlEventData_t* data) {
  const std::vector<gpusim::nvml::XidLine>& xids = Lib().health.xids;
  while (set->cursor < xids.size()) {
    const gpusim::nvml::XidLine& x = xids[set->cursor++];
    if (x.gpu < Lib().device_count && (set->registered[x.gpu] & nvmlEventTypeXidCriticalError)) {
      *data = {};
      data->device = gpusim::nvml::Handle(x.gpu);
      data->eventType = nvmlEventTypeXidCriticalError;
      data->eventData = x.xid;
      data->gpuInstanceId = 0xffffffffu;  // no MIG
      data->computeInstanceId = 0xffffffffu;
      return true;
    }
  }
  return false;
}

}  // namespace

GPUSIM_NVML_API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  std::lock_guard<std::mutex> lk(Mu());
  if (Lib().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  *set = new nvmlEventSet_st;
  Sets().insert(*set);
  return NVML_SUCCESS;
}

// Only Xid events are simulated; asking for any other type answers NVML_ERROR_NOT_SUPPORTED,
// as NVML does for a type the GPU lacks.
GPUSIM_NVML_API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                      unsigned long long eventTypes,
                                                      nvmlEventSet_t set) {
  std::lock_guard<std::mutex> lk(Mu());
  int gpu = -1;
  if (nvmlReturn_t r = CheckDevice(device, &gpu); r != NVML_SUCCESS) return r;
  if (!Sets().count(set)) return NVML_ERROR_INVALID_ARGUMENT;
  if (eventTypes & ~static_cast<unsigned long long>(nvmlEventTypeXidCriticalError)) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  set->registered[gpu] |= eventTypes;
  return NVML_SUCCESS;
}

// NVML_ERROR_TIMEOUT when no event came within `timeoutms`; the state file is re-read every
// 10 ms while waiting.
GPUSIM_NVML_API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                 unsigned int timeoutms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(Mu());
      if (Lib().init_count == 0) return NVML_ERROR_UNINITIALIZED;
      if (!Sets().count(set) || !data) return NVML_ERROR_INVALID_ARGUMENT;
      gpusim::nvml::Refresh();
      if (Next(set, data)) return NVML_SUCCESS;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return NVML_ERROR_TIMEOUT;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(10)));
  }
}

GPUSIM_NVML_API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  std::lock_guard<std::mutex> lk(Mu());
  if (Lib().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!Sets().erase(set)) return NVML_ERROR_INVALID_ARGUMENT;
  delete set;
  return NVML_SUCCESS;
}

#include "ftworker/health/nvml_source.h"

#include <array>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "common/log.h"
#include "ftworker/health/pci_bus_id.h"
#include "ftworker/health/signal_kinds.h"

namespace ft::worker::health {
namespace {

using nvml::nvmlReturn_t;

// Bounds one drain of the event set: an Xid storm is read over several polls instead of
// holding up the daemon's loop.
constexpr int kMaxXidsPerPoll = 1024;

// The reasons that mean the GPU protects itself (nvml_api.h); their names for people.
constexpr std::pair<unsigned long long, const char*> kHardwareThrottle[] = {
    {nvml::nvmlClocksThrottleReasonHwSlowdown, "hw-slowdown"},
    {nvml::nvmlClocksThrottleReasonSwThermalSlowdown, "sw-thermal"},
    {nvml::nvmlClocksThrottleReasonHwThermalSlowdown, "hw-thermal"},
    {nvml::nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw-power-brake"},
};

unsigned long long HardwareThrottle(unsigned long long reasons) {
  unsigned long long mask = 0;
  for (const auto& [bit, name] : kHardwareThrottle) mask |= bit;
  return reasons & mask;
}

std::string ThrottleNames(unsigned long long mask) {
  std::string names;
  for (const auto& [bit, name] : kHardwareThrottle) {
    if (mask & bit) names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
  }
  return names;
}

proto::HwSignal NvmlSignal(const std::string& device, std::string_view kind, int64_t value,
                           int64_t total, int64_t unix_ms, std::string detail) {
  return MakeSignal("nvml", device, kind, value, total, unix_ms, std::move(detail));
}

// One NVML counter read as deltas.
class Counter {
 public:
  // The increase since the previous reading: 0 at the first one, and 0 when the counter went
  // down (a driver reload resets volatile counters: a new baseline, not an error).
  uint64_t Update(uint64_t now) {
    uint64_t delta = known_ && now > last_ ? now - last_ : 0;
    known_ = true;
    last_ = now;
    return delta;
  }
  bool known() const { return known_; }
  uint64_t last() const { return last_; }

 private:
  bool known_ = false;
  uint64_t last_ = 0;
};

// One GPU's readings; each is switched off alone when the GPU or library does not support it.
enum Reading : int {
  kReadEcc,
  kReadRemap,
  kReadRetired,
  kReadThrottle,
  kReadNvlink,
  kReadPcie,
  kReadingCount
};
constexpr const char* kReadingCall[kReadingCount] = {
    "nvmlDeviceGetTotalEccErrors",     "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetRetiredPages",       "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetPcieReplayCounter"};

struct LinkCounter {
  unsigned link;
  nvml::nvmlNvLinkErrorCounter_t counter;
  Counter value;
};

}  // namespace

struct NvmlSource::Gpu {
  enum class State {
    kReadable,
    kLostAtOpen,  // NVML named it lost before the first poll: reported there
    kLost,        // reported; never queried again
    kNoHandle,    // NVML refused a handle for another reason: not read
  };

  int index = 0;
  std::string device;  // normalized bus id, or "nvml:<index>"
  nvml::nvmlDevice_t handle = nullptr;
  State state = State::kReadable;
  bool lost_now = false;  // a reading of this poll answered NVML_ERROR_GPU_IS_LOST
  bool baselined = false;
  std::array<bool, kReadingCount> off{};
  std::array<bool, kReadingCount> warned{};  // a failure other than "not supported" was logged
  Counter ecc;
  Counter retired;
  Counter pcie;
  bool links_probed = false;
  std::vector<LinkCounter> links;  // the (link, counter) pairs this GPU answers
  bool remap_failure = false;
  bool remap_pending = false;
  unsigned long long throttle = 0;  // the hardware bits of the last reading

  void Poll(const NvmlApi& api, int64_t unix_ms, std::vector<proto::HwSignal>* out) {
    if (state == State::kLostAtOpen) ReportLost(unix_ms, out);
    if (state != State::kReadable) return;
    using Read = void (Gpu::*)(const NvmlApi&, bool, int64_t, std::vector<proto::HwSignal>*);
    for (Read read : {&Gpu::ReadEcc, &Gpu::ReadRemap, &Gpu::ReadRetired, &Gpu::ReadThrottle,
                      &Gpu::ReadNvlink, &Gpu::ReadPcie}) {
      (this->*read)(api, !baselined, unix_ms, out);
      if (lost_now) {
        ReportLost(unix_ms, out);
        return;
      }
    }
    baselined = true;
  }

  void Emit(std::vector<proto::HwSignal>* out, std::string_view kind, int64_t value, int64_t total,
            int64_t unix_ms, std::string detail) const {
    out->push_back(NvmlSignal(device, kind, value, total, unix_ms, std::move(detail)));
  }

  void ReportLost(int64_t unix_ms, std::vector<proto::HwSignal>* out) {
    state = State::kLost;
    Emit(out, kGpuLost, 1, 0, unix_ms, "GPU fell off the bus (NVML: GPU is lost)");
    FT_LOG(Error, Worker,
           "GPU {} ({}) is lost to NVML (fallen off the bus); it is no longer read: "
           "reset the GPU or drain the node",
           index, device);
  }

  // Whether `result` carries a value. A lost GPU is noted for Poll; "not supported" switches the
  // reading off for good (a GPU without ECC, a driver without the call); anything else is
  // logged once and the reading tried again at the next poll, its baseline kept.
  bool Answered(const NvmlApi& api, Reading reading, nvmlReturn_t result) {
    if (result == nvml::NVML_SUCCESS) return true;
    if (result == nvml::NVML_ERROR_GPU_IS_LOST) {
      lost_now = true;
    } else if (result == nvml::NVML_ERROR_NOT_SUPPORTED ||
               result == nvml::NVML_ERROR_FUNCTION_NOT_FOUND) {
      off[reading] = true;
      FT_LOG(Info, Worker, "GPU {} ({}) does not support {}; that signal is not read", index,
             device, kReadingCall[reading]);
    } else {
      WarnOnce(api, reading, result);
    }
    return false;
  }

  void WarnOnce(const NvmlApi& api, Reading reading, nvmlReturn_t result) {
    if (warned[reading]) return;
    warned[reading] = true;
    FT_LOG(Warn, Worker, "GPU {} ({}): {} failed: {}; retried every poll, logged once", index,
           device, kReadingCall[reading], NvmlErrorText(api, result));
  }

  // Volatile counts restart at every driver load, so a nonzero count at start is this boot's.
  void ReadEcc(const NvmlApi& api, bool, int64_t unix_ms, std::vector<proto::HwSignal>* out) {
    if (off[kReadEcc] || !api.device_get_total_ecc_errors) return;
    unsigned long long now = 0;
    if (!Answered(api, kReadEcc,
                  api.device_get_total_ecc_errors(handle, nvml::NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                  nvml::NVML_VOLATILE_ECC, &now))) {
      return;
    }
    const bool known = ecc.known();
    const uint64_t before = ecc.last();
    const uint64_t delta = ecc.Update(now);
    const auto n = static_cast<int64_t>(now);
    if (!known && now > 0) {
      Emit(out, kEccUncorrected, n, n, unix_ms,
           fmt::format("volatile uncorrectable ECC errors: {} at start", now));
    } else if (delta > 0) {
      Emit(out, kEccUncorrected, static_cast<int64_t>(delta), n, unix_ms,
           fmt::format("volatile uncorrectable ECC errors {} -> {}", before, now));
    }
  }

  // Flags, reported when they become set (at the first poll too: a GPU that starts with a
  // failed or pending remap is already unfit).
  void ReadRemap(const NvmlApi& api, bool, int64_t unix_ms, std::vector<proto::HwSignal>* out) {
    if (off[kReadRemap] || !api.device_get_remapped_rows) return;
    unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
    if (!Answered(
            api, kReadRemap,
            api.device_get_remapped_rows(handle, &corrected, &uncorrected, &pending, &failure))) {
      return;
    }
    if (failure && !remap_failure) {
      Emit(out, kRowRemapFailure, 1, 0, unix_ms,
           fmt::format("row remapping failed ({} rows remapped for uncorrectable errors)",
                       uncorrected));
    }
    if (pending && !remap_pending) {
      Emit(out, kRowRemapPending, 1, 0, unix_ms,
           fmt::format("row remapping pending until the GPU is reset ({} rows remapped for "
                       "uncorrectable errors)",
                       uncorrected));
    }
    remap_failure = failure != 0;
    remap_pending = pending != 0;
  }

  // Retirements persist across reboots: the count at start is history, only increases count.
  void ReadRetired(const NvmlApi& api, bool, int64_t unix_ms, std::vector<proto::HwSignal>* out) {
    if (off[kReadRetired] || !api.device_get_retired_pages) return;
    unsigned count = 0;  // room for no address: NVML answers the count alone
    nvmlReturn_t r = api.device_get_retired_pages(
        handle, nvml::NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &count, nullptr);
    if (r == nvml::NVML_ERROR_INSUFFICIENT_SIZE) r = nvml::NVML_SUCCESS;
    if (!Answered(api, kReadRetired, r)) return;
    const uint64_t before = retired.last();
    if (uint64_t delta = retired.Update(count); delta > 0) {
      Emit(out, kRetiredPages, static_cast<int64_t>(delta), count, unix_ms,
           fmt::format("pages retired for double-bit ECC errors {} -> {}", before, count));
    }
  }

  // Reported when the set of hardware reasons changes to a nonempty one; the first reading is
  // the baseline (a node that starts hot is seen at the next change).
  void ReadThrottle(const NvmlApi& api, bool first, int64_t unix_ms,
                    std::vector<proto::HwSignal>* out) {
    if (off[kReadThrottle] || !api.device_get_current_clocks_throttle_reasons) return;
    unsigned long long reasons = 0;
    if (!Answered(api, kReadThrottle,
                  api.device_get_current_clocks_throttle_reasons(handle, &reasons))) {
      return;
    }
    const unsigned long long mask = HardwareThrottle(reasons);
    if (!first && mask != 0 && mask != throttle) {
      Emit(out, kThrottle, static_cast<int64_t>(mask), 0, unix_ms,
           fmt::format("clocks throttled: {} (reasons 0x{:x})", ThrottleNames(mask), reasons));
    }
    throttle = mask;
  }

  // Each (link, counter) keeps its own baseline, so a link that fails to answer once does not
  // turn the sum into a false increase. Links the GPU lacks are dropped at the first poll.
  void ReadNvlink(const NvmlApi& api, bool, int64_t unix_ms, std::vector<proto::HwSignal>* out) {
    if (off[kReadNvlink] || !api.device_get_nvlink_error_counter) return;
    if (!links_probed) {
      links_probed = true;
      for (unsigned link = 0; link < nvml::NVML_NVLINK_MAX_LINKS; ++link) {
        for (auto counter : {nvml::NVML_NVLINK_ERROR_DL_CRC_FLIT, nvml::NVML_NVLINK_ERROR_DL_REPLAY,
                             nvml::NVML_NVLINK_ERROR_DL_RECOVERY}) {
          links.push_back({link, counter, {}});
        }
      }
    }
    uint64_t delta = 0, total = 0;
    std::string on_links;
    unsigned last_link = nvml::NVML_NVLINK_MAX_LINKS;
    for (auto it = links.begin(); it != links.end();) {
      unsigned long long now = 0;
      nvmlReturn_t r = api.device_get_nvlink_error_counter(handle, it->link, it->counter, &now);
      const bool absent = r == nvml::NVML_ERROR_NOT_SUPPORTED ||
                          r == nvml::NVML_ERROR_INVALID_ARGUMENT || r == nvml::NVML_ERROR_NOT_FOUND;
      if (absent && !it->value.known()) {
        it = links.erase(it);
        continue;
      }
      if (r == nvml::NVML_ERROR_GPU_IS_LOST) {
        lost_now = true;
        return;
      }
      if (r != nvml::NVML_SUCCESS) {  // a link that answered before: keep its baseline
        WarnOnce(api, kReadNvlink, r);
        ++it;
        continue;
      }
      const uint64_t d = it->value.Update(now);
      delta += d;
      total += now;
      if (d > 0 && it->link != last_link) {
        on_links += fmt::format("{}{}", on_links.empty() ? "" : ", ", it->link);
        last_link = it->link;
      }
      ++it;
    }
    if (links.empty()) off[kReadNvlink] = true;  // no NVLink on this GPU: quietly nothing to read
    if (delta > 0) {
      Emit(out, kNvlinkErrors, static_cast<int64_t>(delta), static_cast<int64_t>(total), unix_ms,
           fmt::format("NVLink CRC/replay/recovery errors +{} on link {}", delta, on_links));
    }
  }

  void ReadPcie(const NvmlApi& api, bool, int64_t unix_ms, std::vector<proto::HwSignal>* out) {
    if (off[kReadPcie] || !api.device_get_pcie_replay_counter) return;
    unsigned now = 0;
    if (!Answered(api, kReadPcie, api.device_get_pcie_replay_counter(handle, &now))) return;
    const uint64_t before = pcie.last();
    if (uint64_t delta = pcie.Update(now); delta > 0) {
      Emit(out, kPcieReplay, static_cast<int64_t>(delta), now, unix_ms,
           fmt::format("PCIe replays {} -> {}", before, now));
    }
  }
};

Status NvmlSource::Open(const std::string& library, std::unique_ptr<NvmlSource>* out) {
  const NvmlApi* api = nullptr;
  FT_RETURN_IF_ERROR(LoadNvml(library, &api));
  const std::string not_read =
      fmt::format("NVML ({}) not usable; GPU signals are not read", library);
  if (nvmlReturn_t r = api->init_v2(); r != nvml::NVML_SUCCESS) {
    return NvmlStatus(*api, r, "nvmlInit_v2").WithContext(not_read);
  }
  unsigned count = 0;
  if (nvmlReturn_t r = api->device_get_count_v2(&count); r != nvml::NVML_SUCCESS) {
    api->shutdown();
    return NvmlStatus(*api, r, "nvmlDeviceGetCount_v2").WithContext(not_read);
  }

  std::vector<Gpu> gpus(count);
  for (unsigned i = 0; i < count; ++i) {
    Gpu& g = gpus[i];
    g.index = static_cast<int>(i);
    g.device = fmt::format("nvml:{}", i);
    nvmlReturn_t r = api->device_get_handle_by_index_v2(i, &g.handle);
    if (r == nvml::NVML_ERROR_GPU_IS_LOST) {
      g.state = Gpu::State::kLostAtOpen;
      continue;
    }
    if (r != nvml::NVML_SUCCESS) {
      g.handle = nullptr;
      g.state = Gpu::State::kNoHandle;
      FT_LOG(Warn, Worker,
             "NVML gives no handle for GPU {}: {}; its signals are not read (check nvidia-smi)", i,
             NvmlErrorText(*api, r));
      continue;
    }
    nvml::nvmlPciInfo_t pci{};
    r = api->device_get_pci_info_v3(g.handle, &pci);
    pci.busId[sizeof pci.busId - 1] = '\0';
    std::optional<std::string> id;
    if (r == nvml::NVML_SUCCESS) id = NormalizePciBusId(pci.busId);
    if (id) {
      g.device = *id;
    } else if (r == nvml::NVML_ERROR_GPU_IS_LOST) {
      g.state = Gpu::State::kLostAtOpen;
    } else {  // still read: its signals name it by index, which no rank can be matched to
      FT_LOG(Warn, Worker, "GPU {}: no PCI bus id from NVML ({}); its signals say {}", i,
             r == nvml::NVML_SUCCESS ? fmt::format("\"{}\"", pci.busId) : NvmlErrorText(*api, r),
             g.device);
    }
  }

  // One event set for every GPU: one wait drains them all.
  nvml::nvmlEventSet_t events = nullptr;
  if (api->event_set_create && count > 0) {
    if (nvmlReturn_t r = api->event_set_create(&events); r != nvml::NVML_SUCCESS) {
      events = nullptr;
      FT_LOG(Warn, Worker, "nvmlEventSetCreate failed: {}; Xid events are not read",
             NvmlErrorText(*api, r));
    }
  }
  int registered = 0;
  for (Gpu& g : gpus) {
    if (!events || g.state != Gpu::State::kReadable) continue;
    nvmlReturn_t r =
        api->device_register_events(g.handle, nvml::nvmlEventTypeXidCriticalError, events);
    if (r == nvml::NVML_SUCCESS) {
      ++registered;
    } else {
      FT_LOG(Warn, Worker,
             "GPU {} ({}): Xid events cannot be registered: {}; its Xids are not read", g.index,
             g.device, NvmlErrorText(*api, r));
    }
  }
  if (events && registered == 0) {
    api->event_set_free(events);
    events = nullptr;
  }
  out->reset(new NvmlSource(api, std::move(gpus), events));
  return Status::Ok();
}

NvmlSource::NvmlSource(const NvmlApi* api, std::vector<Gpu> gpus, nvml::nvmlEventSet_t events)
    : api_(api), gpus_(std::move(gpus)), events_(events) {
  for (const Gpu& g : gpus_) bus_ids_.push_back(g.device);
}

NvmlSource::~NvmlSource() {
  if (events_) api_->event_set_free(events_);
  api_->shutdown();
}

std::vector<proto::HwSignal> NvmlSource::Poll(int64_t unix_ms) {
  std::vector<proto::HwSignal> out;
  DrainXids(unix_ms, &out);
  for (Gpu& g : gpus_) g.Poll(*api_, unix_ms, &out);
  return out;
}

// Xids come as events, not counters: each is reported as delivered, the first poll included
// (NVML delivers only what happened after Open registered the set).
void NvmlSource::DrainXids(int64_t unix_ms, std::vector<proto::HwSignal>* out) {
  if (!events_) return;
  for (int i = 0; i < kMaxXidsPerPoll; ++i) {
    nvml::nvmlEventData_t data{};
    nvmlReturn_t r = api_->event_set_wait_v2(events_, &data, 0);
    if (r == nvml::NVML_ERROR_TIMEOUT) return;
    if (r != nvml::NVML_SUCCESS) {
      if (!warned_events_) {
        warned_events_ = true;
        FT_LOG(Warn, Worker,
               "nvmlEventSetWait_v2 failed: {}; Xids are tried again every poll, logged once",
               NvmlErrorText(*api_, r));
      }
      return;
    }
    if (!(data.eventType & nvml::nvmlEventTypeXidCriticalError)) continue;
    const Gpu* gpu = nullptr;
    for (const Gpu& g : gpus_) {
      if (g.handle != nullptr && g.handle == data.device) gpu = &g;
    }
    // An event naming no GPU we know is still evidence about the node.
    const auto xid = static_cast<int64_t>(data.eventData);
    if (gpu) {
      gpu->Emit(out, kXid, xid, 0, unix_ms, fmt::format("Xid {}", xid));
    } else {
      out->push_back(NvmlSignal("host", kXid, xid, 0, unix_ms,
                                fmt::format("Xid {} on a GPU NVML did not name", xid)));
    }
  }
}

}  // namespace ft::worker::health

// ft::worker::health::NvmlSource: the GPU health signals of this node, read through NVML
// (nvml_api.h) once a second and returned as proto::HwSignal deltas: Xid events, volatile
// uncorrectable ECC errors, retired pages, row remapping failure / pending, hardware clock
// throttling, NVLink and PCIe replay errors, a GPU fallen off the bus.
//
// What a poll reports: increases of counters since the previous poll (a counter that went down,
// as after a driver reload, is a new baseline, not a signal); flags when they become set; Xid
// events as NVML delivers them. The first poll takes the baseline, but conditions already bad
// at start are reported once: a row remapping failure or pending remap, volatile uncorrectable
// ECC errors, a lost GPU. A lost GPU is reported once and not queried again.
//
// Ownership and threads: the daemon owns one NvmlSource (Open's unique_ptr); Open calls
// nvmlInit and the destructor nvmlShutdown. Poll and the destructor are called from one thread;
// bus_ids() is immutable after Open. NVML's handles belong to the object.
#ifndef FT_FTWORKER_HEALTH_NVML_SOURCE_H_
#define FT_FTWORKER_HEALTH_NVML_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "ftworker/health/nvml_api.h"
#include "proto/messages.h"

namespace ft::worker::health {

class NvmlSource {
 public:
  // Loads `library` (FT_NVML_LIBRARY; kNvmlLibrary by default), initialises NVML, names every
  // GPU and registers for Xid events. Not OK when NVML cannot be loaded or initialised: the
  // message names the library and says GPU signals are not read. A GPU that cannot be named or
  // registered is logged and read as far as it answers.
  static Status Open(const std::string& library, std::unique_ptr<NvmlSource>* out);
  ~NvmlSource();
  NvmlSource(const NvmlSource&) = delete;
  NvmlSource& operator=(const NvmlSource&) = delete;

  // The signals since the previous poll (source "nvml", device a bus id of bus_ids(), ranks
  // empty for the caller to fill), each stamped `unix_ms`.
  std::vector<proto::HwSignal> Poll(int64_t unix_ms);

  // The GPUs in NVML's index order, by normalized PCI bus id ("0000:3a:00.0"); "nvml:<index>"
  // for a GPU whose bus id NVML did not tell (lost before Open).
  const std::vector<std::string>& bus_ids() const { return bus_ids_; }

 private:
  struct Gpu;  // one GPU's handle, baselines and readings (nvml_source.cc)

  NvmlSource(const NvmlApi* api, std::vector<Gpu> gpus, nvml::nvmlEventSet_t events);
  void DrainXids(int64_t unix_ms, std::vector<proto::HwSignal>* out);

  const NvmlApi* const api_;
  std::vector<Gpu> gpus_;
  std::vector<std::string> bus_ids_;
  nvml::nvmlEventSet_t events_;  // null: no Xid events (the library or no GPU supports them)
  bool warned_events_ = false;   // a failing event wait is logged once
};

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_NVML_SOURCE_H_

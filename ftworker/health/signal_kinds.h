// The hardware and system signals ftworker reads (proto::HwSignal::kind) and which of them
// are evidence against the hardware (critical). One table: the readers (nvml_source.h,
// rdma_port_source.h, kernel_log.h) name kinds from it, the master's decision reads
// `critical` as the worker set it.
//
// Xids: the classes of Meta's open health checks (facebookresearch/gcm; ../../docs/health.md):
// 13, 31, 43, 45, 63, 68, 92 and 109 come from what an application did (an illegal address,
// a fault in its kernel, a context reset it caused) or are corrected events; every other Xid
// is the GPU's (79: fallen off the bus; 48, 64, 94, 95: uncorrectable ECC and row remapping;
// 74: NVLink).
#ifndef FT_FTWORKER_HEALTH_SIGNAL_KINDS_H_
#define FT_FTWORKER_HEALTH_SIGNAL_KINDS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "proto/messages.h"

namespace ft::worker::health {

// Kinds, as they travel.
inline constexpr std::string_view kXid = "xid";                          // value: the Xid
inline constexpr std::string_view kEccUncorrected = "ecc-uncorrected";  // volatile uncorrectable ECC errors
inline constexpr std::string_view kRowRemapFailure = "row-remap-failure";
inline constexpr std::string_view kRowRemapPending = "row-remap-pending";
inline constexpr std::string_view kRetiredPages = "retired-pages";      // double-bit ECC retirements
inline constexpr std::string_view kThrottle = "throttle";               // value: NVML's reason mask
inline constexpr std::string_view kNvlinkErrors = "nvlink-errors";      // CRC + replay + recovery
inline constexpr std::string_view kPcieReplay = "pcie-replay";
inline constexpr std::string_view kGpuLost = "gpu-lost";                // NVML: GPU is lost
inline constexpr std::string_view kLinkDowned = "link-downed";          // RDMA port counters from here
inline constexpr std::string_view kLinkErrorRecovery = "link-error-recovery";
inline constexpr std::string_view kSymbolError = "symbol-error";
inline constexpr std::string_view kPortRcvErrors = "port-rcv-errors";
inline constexpr std::string_view kPortXmitDiscards = "port-xmit-discards";
inline constexpr std::string_view kPortXmitWait = "port-xmit-wait";
inline constexpr std::string_view kLocalAckTimeout = "local-ack-timeout-err";
inline constexpr std::string_view kOutOfSequence = "out-of-sequence";
inline constexpr std::string_view kPortDown = "port-down";              // state left ACTIVE
inline constexpr std::string_view kMce = "mce";                         // kernel log from here
inline constexpr std::string_view kOomKill = "oom-kill";                // pid: the victim

// An Xid that an application can cause alone, or a corrected event: never evidence against
// the GPU.
bool IsApplicationXid(int64_t xid);

// Whether a signal of `kind` with `value` is evidence against the hardware. Throttling,
// PCIe replays, congestion counters (xmit_wait) and OOM kills are reported, not critical.
bool IsCritical(std::string_view kind, int64_t value);

// The one maker of a reader's signal: `critical` from IsCritical, `ranks` left to the caller
// (rank_devices.h).
proto::HwSignal MakeSignal(std::string_view source, std::string device, std::string_view kind, int64_t value,
                           int64_t total, int64_t unix_ms, std::string detail);

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_SIGNAL_KINDS_H_

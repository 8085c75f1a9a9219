#include "ftworker/health/signal_kinds.h"

namespace ft::worker::health {

bool IsApplicationXid(int64_t xid) {
  switch (xid) {
    case 13:   // graphics engine exception: an illegal address, an assert in the app's kernel
    case 31:   // GPU memory page fault: the app's bad pointer
    case 43:   // GPU stopped processing: the app's context was reset
    case 45:   // preemptive cleanup after the app's context went away
    case 63:   // ECC page retirement or row remapping recorded (corrected, the GPU stays usable)
    case 68:   // video processor exception
    case 92:   // high single-bit ECC rate (corrected)
    case 109:  // context switch timeout, caused by the app's work
      return true;
    default:
      return false;
  }
}

bool IsCritical(std::string_view kind, int64_t value) {
  if (kind == kXid) return !IsApplicationXid(value);
  return kind == kEccUncorrected || kind == kRowRemapFailure || kind == kRowRemapPending ||
         kind == kRetiredPages || kind == kGpuLost || kind == kLinkDowned || kind == kPortDown ||
         kind == kMce;
}

proto::HwSignal MakeSignal(std::string_view source, std::string device, std::string_view kind, int64_t value,
                           int64_t total, int64_t unix_ms, std::string detail) {
  proto::HwSignal s;
  s.source = std::string(source);
  s.device = std::move(device);
  s.kind = std::string(kind);
  s.value = value;
  s.total = total;
  s.critical = IsCritical(kind, value);
  s.unix_ms = unix_ms;
  s.detail = std::move(detail);
  return s;
}

}  // namespace ft::worker::health

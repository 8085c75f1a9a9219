// One spelling of a PCI bus id: CUDA writes "0000:3B:00.0", NVML "00000000:3B:00.0", sysfs
// "0000:3b:00.0". Signals and ranks are matched on the normalized form.
#ifndef FT_FTWORKER_HEALTH_PCI_BUS_ID_H_
#define FT_FTWORKER_HEALTH_PCI_BUS_ID_H_

#include <optional>
#include <string>
#include <string_view>

namespace ft::worker::health {

// "dddd:bb:dd.f", lower case, the domain in 4 hex digits (sysfs's form); nullopt when `id` is
// not "domain:bus:device.function" in hex.
std::optional<std::string> NormalizePciBusId(std::string_view id);

}  // namespace ft::worker::health

#endif  // FT_FTWORKER_HEALTH_PCI_BUS_ID_H_

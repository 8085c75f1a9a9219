#include "ftworker/health/pci_bus_id.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>

namespace ft::worker::health {
namespace {

// Parses hex digits up to `stop` (or the end); advances `s`.
bool TakeHex(std::string_view* s, char stop, uint32_t max, uint32_t* out) {
  size_t end = stop == '\0' ? s->size() : s->find(stop);
  if (end == std::string_view::npos || end == 0 || end > 8) return false;
  uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(s->data(), s->data() + end, v, 16);
  if (ec != std::errc() || ptr != s->data() + end || v > max) return false;
  *out = v;
  s->remove_prefix(stop == '\0' ? end : end + 1);
  return true;
}

}  // namespace

std::optional<std::string> NormalizePciBusId(std::string_view id) {
  uint32_t domain = 0, bus = 0, device = 0, function = 0;
  if (!TakeHex(&id, ':', 0xffff, &domain) || !TakeHex(&id, ':', 0xff, &bus) ||
      !TakeHex(&id, '.', 0x1f, &device) || !TakeHex(&id, '\0', 0x7, &function)) {
    return std::nullopt;
  }
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
}

}  // namespace ft::worker::health

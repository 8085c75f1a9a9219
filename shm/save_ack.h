// A save's acknowledgement (mailbox.h: kSave / kSaveAtStep answered with result 0): the copy the
// rank's checkpoint agent took, as one typed value. The mailbox carries it as the ack message
// "saved step=<S> digest=<hex16> torn=<0|1> bytes=<n> ms=<t>", made by SaveAckMessage and read by
// ParseSaveAck only; the worker puts the typed value into its CommandAck for the master
// (proto/codec.h, docs/redis-schema.md). Header-only: proto/ reads acks of the previous
// release, which carried only the message, through ParseSaveAck too.
#ifndef FT_SHM_SAVE_ACK_H_
#define FT_SHM_SAVE_ACK_H_

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace ft::shm {

struct SavedCopy {
  int64_t step = -1;    // the step the copy holds
  uint64_t digest = 0;  // its content digest (jitckpt's ContentDigest)
  bool torn = false;    // not one step's state: never the rank's copy (its arena keeps the whole one)
  uint64_t bytes = 0;   // data bytes
  int64_t ms = 0;       // how long the save took

  bool operator==(const SavedCopy&) const = default;
};

inline std::string SaveAckMessage(const SavedCopy& c) {
  char digest[17];
  std::snprintf(digest, sizeof(digest), "%016llx", static_cast<unsigned long long>(c.digest));
  return "saved step=" + std::to_string(c.step) + " digest=" + digest + " torn=" + (c.torn ? "1" : "0") +
         " bytes=" + std::to_string(c.bytes) + " ms=" + std::to_string(c.ms);
}

// The message's `key=value` words in any order; an unknown word is skipped (a newer writer's),
// a missing or garbled value other than the step is left at its default (an older writer wrote
// neither bytes nor ms). nullopt without a step: no save's acknowledgement.
inline std::optional<SavedCopy> ParseSaveAck(std::string_view message) {
  SavedCopy c;
  bool has_step = false;
  while (!message.empty()) {
    const size_t space = message.find(' ');
    const std::string_view word = message.substr(0, space);
    message = space == std::string_view::npos ? std::string_view() : message.substr(space + 1);
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
    auto read = [value](auto* out, int base = 10) {
      auto parsed = *out;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed, base);
      if (ec != std::errc() || end != value.data() + value.size() || value.empty()) return false;
      *out = parsed;
      return true;
    };
    if (key == "step") {
      int64_t step = -1;
      if (!read(&step) || step < 0) return std::nullopt;
      c.step = step;
      has_step = true;
    } else if (key == "digest") {
      if (value.size() <= 16) read(&c.digest, 16);
    } else if (key == "torn") {
      c.torn = value == "1";
    } else if (key == "bytes") {
      read(&c.bytes);
    } else if (key == "ms") {
      read(&c.ms);
    }
  }
  if (!has_step) return std::nullopt;
  return c;
}

}  // namespace ft::shm

#endif  // FT_SHM_SAVE_ACK_H_

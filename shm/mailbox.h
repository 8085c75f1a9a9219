// The command mailbox: a reader (ftworker) posts commands to the process; the process's
// poller thread takes them and acknowledges. Eight slots, used round-robin by sequence
// number; a slot is reused only after its previous command was acknowledged.
#ifndef FT_SHM_MAILBOX_H_
#define FT_SHM_MAILBOX_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "shm/segment.h"

namespace ft::shm {

struct Command {
  uint64_t seq = 0;
  uint32_t type = 0;
  uint8_t payload[kMailboxPayloadBytes] = {};
};

struct Ack {
  int32_t result = 0;  // 0 done, else a StatusCode value
  std::string message;
};

// Reader side. Not thread-safe: one poster per segment.
// kNotReady when the slot this command needs still holds an unacknowledged one.
Status PostCommand(const Segment& segment, uint32_t type, std::span<const uint8_t> payload,
                   uint64_t* seq);
// The acknowledgement of command `seq`, once the process wrote it.
std::optional<Ack> PollAck(const Segment& segment, uint64_t seq);

// Process side (the poller thread). Commands not yet acknowledged, oldest first.
std::optional<Command> TakeCommand(const Segment& segment);
void AckCommand(const Segment& segment, uint64_t seq, int32_t result, std::string_view message);

}  // namespace ft::shm

#endif  // FT_SHM_MAILBOX_H_

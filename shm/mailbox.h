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

// Command types (MailboxSlot::type). The payload is the command's text, UTF-8, NUL-padded to
// 128 bytes. libft.so acks types it does not implement with kUnsupported ("not supported"),
// which ftworker reports as result "not_supported". Part of the segment contract: never
// renumber.
enum class CommandType : uint32_t {
  kMessage = 1,     // text for the application (shown in its log by libft.so)
  kSave = 2,        // just-in-time checkpoint now; text = the master's save id
  kSaveAtStep = 3,  // a periodic save at the next ft_step_done; text = the request's id
};

// How the checkpoint agent acknowledges kSave / kSaveAtStep (docs/checkpoints.md):
//   result 0, message "saved step=<S> digest=<hex16> torn=<0|1> bytes=<n> ms=<t>" (made and read
//   by shm/save_ack.h only: SaveAckMessage, ParseSaveAck)
//   result kNotFound, message "nothing registered"   (ftworker reports "nothing_registered")
//   result kNotReady, message "scheduled for the next step"   (kSaveAtStep, before it ran)
//   any other result: failed, the message says why (kUnavailable "no step completed or
//   restored yet: nothing to save": a kSave before the first ft_step_done or ft_restore).
// A save command that arrives while a save runs is coalesced: it is acknowledged with the
// running save's outcome.

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

// The doorbell: PostCommand bumps ControlPage::command_bell and wakes a process waiting on it,
// so a command reaches the process at once rather than at its next poll (up to 5 ms when it
// is idle: 3-6 % of a just-in-time save of a GiB at memory speed). The process reads the bell
// before it takes commands and then waits for it to move, at most `timeout_ns` (a reader that
// rings no bell, an older ftworker, costs it nothing but that latency).
uint32_t CommandBell(const Segment& segment);
void WaitForCommand(const Segment& segment, uint32_t seen_bell, uint64_t timeout_ns);

// Process side (the poller thread). Commands not yet acknowledged, oldest first.
std::optional<Command> TakeCommand(const Segment& segment);
// The oldest unacknowledged command with a sequence number above `after`: a process that hands
// some commands to another thread (acknowledged later) takes the next ones past them.
std::optional<Command> TakeCommandAfter(const Segment& segment, uint64_t after);
void AckCommand(const Segment& segment, uint64_t seq, int32_t result, std::string_view message);

}  // namespace ft::shm

#endif  // FT_SHM_MAILBOX_H_

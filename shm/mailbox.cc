#include "shm/mailbox.h"

#include <cstring>

namespace ft::shm {

Status PostCommand(const Segment& segment, uint32_t type, std::span<const uint8_t> payload,
                   uint64_t* seq) {
  if (payload.size() > kMailboxPayloadBytes) {
    return Status::InvalidArgument("command payload of " + std::to_string(payload.size()) +
                                   " bytes exceeds " + std::to_string(kMailboxPayloadBytes));
  }
  ControlPage* control = segment.control();
  uint64_t next = control->next_command_seq.load(std::memory_order_relaxed) + 1;
  MailboxSlot& slot = control->mailbox[next % kMailboxSlots];
  if (slot.posted_seq.load(std::memory_order_acquire) != slot.acked_seq.load(std::memory_order_acquire)) {
    return Status::NotReady("mailbox full: the process has not acknowledged command " +
                            std::to_string(slot.posted_seq.load(std::memory_order_relaxed)));
  }
  slot.type = type;
  std::memset(slot.payload, 0, sizeof(slot.payload));
  if (!payload.empty()) std::memcpy(slot.payload, payload.data(), payload.size());
  slot.posted_seq.store(next, std::memory_order_release);
  control->next_command_seq.store(next, std::memory_order_relaxed);
  *seq = next;
  return Status::Ok();
}

std::optional<Ack> PollAck(const Segment& segment, uint64_t seq) {
  const MailboxSlot& slot = segment.control()->mailbox[seq % kMailboxSlots];
  if (slot.acked_seq.load(std::memory_order_acquire) != seq) return std::nullopt;
  Ack ack;
  ack.result = slot.ack_result;
  ack.message.assign(slot.ack_message, strnlen(slot.ack_message, sizeof(slot.ack_message)));
  return ack;
}

std::optional<Command> TakeCommand(const Segment& segment) { return TakeCommandAfter(segment, 0); }

std::optional<Command> TakeCommandAfter(const Segment& segment, uint64_t after) {
  ControlPage* control = segment.control();
  std::optional<Command> oldest;
  for (const MailboxSlot& slot : control->mailbox) {
    uint64_t posted = slot.posted_seq.load(std::memory_order_acquire);
    if (posted == slot.acked_seq.load(std::memory_order_relaxed) || posted <= after) continue;
    if (oldest && oldest->seq < posted) continue;
    oldest.emplace();
    oldest->seq = posted;
    oldest->type = slot.type;
    std::memcpy(oldest->payload, slot.payload, sizeof(slot.payload));
  }
  return oldest;
}

void AckCommand(const Segment& segment, uint64_t seq, int32_t result, std::string_view message) {
  MailboxSlot& slot = segment.control()->mailbox[seq % kMailboxSlots];
  if (slot.posted_seq.load(std::memory_order_acquire) != seq) return;  // not ours to ack
  slot.ack_result = result;
  size_t n = std::min(message.size(), sizeof(slot.ack_message) - 1);
  std::memcpy(slot.ack_message, message.data(), n);
  slot.ack_message[n] = '\0';
  slot.acked_seq.store(seq, std::memory_order_release);
}

}  // namespace ft::shm

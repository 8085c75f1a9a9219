#include "shm/mailbox.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ft::shm {

namespace {

uint32_t* BellWord(ControlPage* control) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  return reinterpret_cast<uint32_t*>(&control->command_bell);
}

void RingBell(ControlPage* control) {
  control->command_bell.fetch_add(1, std::memory_order_release);
  (void)syscall(SYS_futex, BellWord(control), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

}  // namespace

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
  RingBell(control);
  return Status::Ok();
}

uint32_t CommandBell(const Segment& segment) {
  return segment.control()->command_bell.load(std::memory_order_acquire);
}

void WaitForCommand(const Segment& segment, uint32_t seen_bell, uint64_t timeout_ns) {
  struct timespec ts{static_cast<time_t>(timeout_ns / 1000000000ull), static_cast<long>(timeout_ns % 1000000000ull)};
  // The segment is shared between processes: a shared (not FUTEX_PRIVATE) wait.
  long r = syscall(SYS_futex, BellWord(segment.control()), FUTEX_WAIT, seen_bell, &ts, nullptr, 0);
  if (r == 0 || errno == ETIMEDOUT || errno == EAGAIN || errno == EINTR) return;
  nanosleep(&ts, nullptr);  // no futex here (a sandbox): the plain pause
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

// The per-process segment: the binary contract between libft.so (the producer, inside a
// training process) and its readers (ftworker, ftdump), which may be built at different
// times. Every offset and size below is pinned by shm/tests/layout_test.cc and described in
// docs/shm-format.md. This is the newest layout; change it only together with kLayoutVersion,
// after freezing the header it replaces in layout_v<N>.h (layout_v1.h is version 1), which
// readers keep reading: a worker upgraded mid-job meets ranks still running the older libft.so.
// What the records say has its own version, record_version (shm/records.h).
//
//   offset 0                 SegmentHeader   4 KiB  written by the process
//   offset 4096              ControlPage     4 KiB  written by the reader (ring cursor,
//                                                   commands) and the process (acks)
//   offset 8192              CommSlot[n]     n*256  written by the process
//   ring_offset              Record[cap]     cap*64 written by the process
//
// All fields are little-endian (x86-64, aarch64). Live fields are std::atomic of lock-free
// width, so their layout equals the plain integer's (static_asserts below). Times are
// CLOCK_MONOTONIC nanoseconds, which every process of one host shares.
#ifndef FT_SHM_LAYOUT_H_
#define FT_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/seqlock.h"

namespace ft::shm {

inline constexpr uint64_t kMagic = 0x3147455354465446ull;  // "FTFTSEG1" read as bytes
inline constexpr uint32_t kLayoutVersion = 2;  // 2: hook_failures in the header
// The oldest layout readers still read (layout_v1.h): what a newer field's bytes hold in an
// older segment is the reader's to know (HeaderCopy::layout_version).
inline constexpr uint32_t kOldestReadableLayoutVersion = 1;
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint32_t kControlBytes = 4096;
inline constexpr uint32_t kCommSlotBytes = 256;
inline constexpr uint32_t kRecordBytes = 64;
inline constexpr uint32_t kMailboxSlots = 8;
inline constexpr uint32_t kMailboxPayloadBytes = 128;
inline constexpr uint32_t kMailboxMessageBytes = 96;
inline constexpr size_t kNameBytes = 64;
inline constexpr uint32_t kHookFailureSlots = 32;

// One place inside libft.so where a failure was swallowed (fail-open) and how many times.
// A slot is claimed by its first failure (place written with a CAS from 0, then counted);
// place ids are stable numbers named in shm/hook_failures.h, never positions.
struct HookFailureSlot {
  std::atomic<uint32_t> place;                 // 0: 0 = free
  uint32_t reserved;                           // 4
  std::atomic<uint64_t> count;                 // 8
};

// What the process is doing, as its readers see it.
enum class ProcessState : uint32_t {
  kInitializing = 0,  // header being written; readers must wait
  kRunning = 1,
  kExited = 2,        // clean exit: the segment is removed right after
  kDisabled = 3,      // libft.so turned itself off (fail-open); no further records
};

// The one name of each state, for every reader that prints one (ftdump, ftworker status);
// "?" for a value no version ever wrote.
inline constexpr const char* ProcessStateName(uint32_t state) {
  switch (state) {
    case static_cast<uint32_t>(ProcessState::kInitializing): return "initializing";
    case static_cast<uint32_t>(ProcessState::kRunning): return "running";
    case static_cast<uint32_t>(ProcessState::kExited): return "exited";
    case static_cast<uint32_t>(ProcessState::kDisabled): return "disabled";
  }
  return "?";
}

struct SegmentHeader {
  // Static part: written once, before state leaves kInitializing.
  uint64_t magic;               // 0
  uint32_t layout_version;      // 8
  uint32_t header_bytes;        // 12
  uint64_t segment_bytes;       // 16
  uint32_t control_offset;      // 24
  uint32_t comm_table_offset;   // 28
  uint32_t comm_slot_count;     // 32
  uint32_t comm_slot_bytes;     // 36
  uint64_t ring_offset;         // 40
  uint32_t ring_capacity;       // 48: records, a power of two
  uint32_t record_bytes;        // 52
  int32_t global_rank;          // 56: -1 unknown
  int32_t local_rank;           // 60
  int32_t world_size;           // 64
  int32_t pid;                  // 68
  uint64_t incarnation;         // 72: process start, CLOCK_REALTIME ns; tells a restarted rank apart
  uint64_t created_unix_ns;     // 80
  char job[kNameBytes];         // 88: NUL-terminated
  char node[kNameBytes];        // 152
  char host[kNameBytes];        // 216
  uint32_t record_version;      // 280: the record format (shm/records.h kRecordVersion); 0 = 1,
                                //      written by producers that predate the field
  // The PCI bus id of the GPU the rank uses ("0000:3B:00.0", cudaDeviceGetPCIBusId), written
  // by libft.so's poller when it first learns the app's device, then gpu_bus_id_ready = 1
  // (release): the worker maps the node's hardware signals to ranks by it. Added within
  // version 1 in bytes that were reserved zero (an older producer reads as "not known").
  std::atomic<uint32_t> gpu_bus_id_ready;  // 284
  char gpu_bus_id[32];                      // 288: NUL-terminated
  // Live part, one cache line per writer.
  alignas(64) std::atomic<uint32_t> state;        // 320: ProcessState
  std::atomic<int32_t> exit_status;               // 324: set with kExited
  // The signal that told the process to terminate (SIGTERM from a launcher, a scheduler's
  // preemption; FT_CKPT_ON_SIGNAL) and when (CLOCK_REALTIME ns), written by libft.so's handler
  // before its termination save: a death that follows was asked for, not a crash. 0 = none.
  // Added within version 1 in bytes that were reserved zero.
  std::atomic<int32_t> terminate_signal;          // 328
  uint32_t reserved_live0;                        // 332
  std::atomic<uint64_t> terminate_unix_ns;        // 336
  alignas(64) std::atomic<uint64_t> heartbeat_ns;  // 384: advanced by the poller thread
  std::atomic<uint64_t> heartbeat_count;           // 392
  alignas(64) std::atomic<uint64_t> last_call_ns;  // 448: the app's last CUDA/NCCL call
  std::atomic<uint64_t> call_count;                // 456
  // Host threads of the app inside a synchronizing CUDA call (stream/device/event synchronize,
  // synchronous copy or set): since when (0 = none) and how many. Added within version 1 in
  // bytes that were reserved zero, so an older producer reads as "not blocked".
  std::atomic<uint64_t> blocked_since_ns;          // 464
  std::atomic<uint64_t> blocked_count;             // 472
  alignas(64) std::atomic<uint64_t> ring_head;     // 512: records ever published
  std::atomic<uint64_t> ring_dropped;              // 520: records dropped on a full ring
  // 1 + the step of the app's last ft_step_done (0: none yet), written by libft.so's checkpoint
  // API: after a clean exit the worker reads the step the job ended at. Added within version 1
  // in bytes that were reserved zero (an older producer reads as "none").
  std::atomic<int64_t> app_step_plus1;             // 528
  // The termination save's grace (FT_CKPT_TERM_GRACE, ms) when libft.so armed it (0: none, or an
  // older producer): a worker stopping the rank waits that long, and more, before SIGKILL, so
  // its stop never cuts the save it asked for. Added within version 1 in reserved bytes.
  std::atomic<uint32_t> term_grace_ms;             // 536
  uint32_t reserved_term0;                         // 540
  // What the app's ft_restore did: 0 none yet (or an older producer), 1 it restored nothing
  // (the plan had no step, or the restore failed: the app starts from its own state), S + 2 it
  // restored step S; with the version of the restore plan it read (restore_plan_version is
  // written first). The master compares them across the ranks of a launch: one step on every
  // rank, or the job is stopped. Added within version 1 in reserved bytes.
  std::atomic<int64_t> restored_step_plus2;        // 544
  std::atomic<int64_t> restore_plan_version;       // 552
  // The steps the job runs in all, numbered as it numbers them for ft_step_done (so the steps
  // left are this minus app_step_plus1 - 1); 0: not said. Written by libft.so at start
  // (FT_TOTAL_STEPS) and by ft_set_total_steps, at any time: the worker reads it on each
  // summary. Added within version 2 in bytes that were reserved zero (an older producer reads
  // as "not said").
  std::atomic<int64_t> total_steps;                // 560
  uint8_t reserved1[1024 - 568];
  // Failures libft.so swallowed, by place (shm/hook_failures.h); the last slot also takes
  // places that found no free slot.
  HookFailureSlot hook_failures[kHookFailureSlots];  // 1024
  uint8_t reserved2[kHeaderBytes - 1024 - kHookFailureSlots * 16];
};

// A command from the reader to the process, and the process's acknowledgement. The reader
// writes type and payload, then publishes posted_seq (release); the process handles it and
// writes ack_result and ack_message, then acked_seq = posted_seq (release).
struct MailboxSlot {
  std::atomic<uint64_t> posted_seq;            // 0
  std::atomic<uint64_t> acked_seq;             // 8
  uint32_t type;                               // 16
  int32_t ack_result;                          // 20: 0 done, else a StatusCode
  uint8_t payload[kMailboxPayloadBytes];       // 24
  char ack_message[kMailboxMessageBytes];      // 152
  uint8_t reserved[256 - 248];
};

struct ControlPage {
  std::atomic<uint64_t> ring_tail;             // 0: records consumed by the reader
  std::atomic<int32_t> reader_pid;             // 8: the attached reader, 0 none
  uint8_t reserved0[128 - 12];
  std::atomic<uint64_t> next_command_seq;      // 128: the reader's command counter
  std::atomic<uint32_t> command_bell;          // 136: bumped after each post (a futex word)
  uint8_t reserved1[256 - 140];
  MailboxSlot mailbox[kMailboxSlots];          // 256
  uint8_t reserved2[kControlBytes - 256 - kMailboxSlots * sizeof(MailboxSlot)];
};

// CommSlot::flags bits (written before comm_id is published; never change afterwards).
inline constexpr uint32_t kCommSlotP2P = 1;  // the comm's Send/Recv slot (seq counts this
                                             // rank's p2p ops), not its collectives slot

// One communicator's progress. Two single writers, each behind its own seqlock (ft::Seqlock,
// common/seqlock.h: a u32 version, odd while writing): the app thread (what it entered) and
// the poller thread (what the GPU started and completed). A reader retries a group until it
// sees the same even version on both sides of its copy.
struct CommSlot {
  std::atomic<uint64_t> comm_id;               // 0: 0 = free; published last
  int32_t comm_rank;                           // 8
  int32_t comm_size;                           // 12
  int32_t global_rank;                         // 16
  uint32_t flags;                              // 20: kCommSlot* bits
  uint8_t reserved0[64 - 24];
  // Entered (app thread).
  Seqlock enter_version;                       // 64: u32
  std::atomic<uint32_t> enter_op;              // 68: op kind of the last entered op
  std::atomic<uint64_t> entered_seq;           // 72: collectives entered so far
  std::atomic<uint64_t> entered_ns;            // 80
  std::atomic<uint64_t> entered_bytes;         // 88
  std::atomic<int64_t> entered_peer;           // 96: root or peer, -1 none
  uint8_t reserved1[128 - 104];
  // Progress (poller thread).
  Seqlock progress_version;                    // 128: u32
  uint32_t reserved2;                          // 132
  std::atomic<uint64_t> started_seq;           // 136
  std::atomic<uint64_t> started_ns;            // 144
  std::atomic<uint64_t> completed_seq;         // 152
  std::atomic<uint64_t> completed_ns;          // 160
  std::atomic<uint64_t> last_duration_ns;      // 168
  // The oldest op the process knows to be pending (entered, not completed) and when it was
  // entered; 0 none known. pending_seq == completed_seq + 1 means it is the oldest pending
  // op; a larger one is a bound (ops are numbered in entry order: the ones before it were
  // entered earlier). Added within version 1 in bytes that were reserved zero.
  std::atomic<uint64_t> pending_seq;           // 176
  std::atomic<uint64_t> pending_ns;            // 184
  uint8_t reserved3[256 - 192];
};

// One ring record. The meaning of a..d depends on type (docs/shm-format.md).
struct Record {
  uint16_t type;      // 0
  uint16_t flags;     // 2
  uint32_t comm_slot; // 4
  uint64_t time_ns;   // 8
  uint64_t comm_id;   // 16
  uint64_t seq;       // 24
  uint64_t a;         // 32
  uint64_t b;         // 40
  uint64_t c;         // 48
  uint64_t d;         // 56
};

static_assert(sizeof(SegmentHeader) == kHeaderBytes);
static_assert(offsetof(SegmentHeader, gpu_bus_id_ready) == 284 && offsetof(SegmentHeader, gpu_bus_id) == 288);
static_assert(offsetof(SegmentHeader, state) == 320);
static_assert(offsetof(SegmentHeader, app_step_plus1) == 528);
static_assert(offsetof(SegmentHeader, term_grace_ms) == 536);
static_assert(offsetof(SegmentHeader, restored_step_plus2) == 544);
static_assert(offsetof(SegmentHeader, restore_plan_version) == 552);
static_assert(offsetof(SegmentHeader, total_steps) == 560);
static_assert(sizeof(std::atomic<int64_t>) == 8 && std::atomic<int64_t>::is_always_lock_free);
static_assert(sizeof(ControlPage) == kControlBytes);
static_assert(sizeof(MailboxSlot) == 256);
static_assert(sizeof(HookFailureSlot) == 16);
static_assert(sizeof(CommSlot) == kCommSlotBytes);
static_assert(sizeof(Record) == kRecordBytes);
static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(Seqlock) == 4 && alignof(Seqlock) == 4);  // CommSlot's versions: u32

}  // namespace ft::shm

#endif  // FT_SHM_LAYOUT_H_

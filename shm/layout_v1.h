// Layout version 1 of the segment header, frozen as libft.so wrote it until version 2 (which put
// the hook-failure counters at offset 1024). Readers keep reading it: a worker upgraded while a
// job runs meets ranks still running the older libft.so (docs/shm-format.md, "Versions").
//
// Only the header changed between versions 1 and 2; the control page, comm slots, mailbox and
// records are those of layout.h, unchanged since version 1 (shm/tests/layout_test.cc pins
// them, and this header, byte by byte). Never edit this file: a new version freezes the header
// it replaces in a layout_v<N>.h of its own.
//
// Version 1 differs from version 2 only in what its reserved bytes may hold: a version-1
// producer leaves 280..320 zero (record_version 0 = records version 1), 328..344 zero (no
// termination signal recorded) and 1024..1536 zero (no hook-failure counters); a reader of a
// version-1 segment must not read those bytes as version 2's fields.
#ifndef FT_SHM_LAYOUT_V1_H_
#define FT_SHM_LAYOUT_V1_H_

#include <cstddef>
#include <cstdint>

namespace ft::shm::v1 {

inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr size_t kNameBytes = 64;

// Plain integers: this is a description of bytes, read from a private copy.
struct SegmentHeader {
  uint64_t magic;               // 0
  uint32_t layout_version;      // 8: 1
  uint32_t header_bytes;        // 12
  uint64_t segment_bytes;       // 16
  uint32_t control_offset;      // 24
  uint32_t comm_table_offset;   // 28
  uint32_t comm_slot_count;     // 32
  uint32_t comm_slot_bytes;     // 36
  uint64_t ring_offset;         // 40
  uint32_t ring_capacity;       // 48
  uint32_t record_bytes;        // 52
  int32_t global_rank;          // 56
  int32_t local_rank;           // 60
  int32_t world_size;           // 64
  int32_t pid;                  // 68
  uint64_t incarnation;         // 72
  uint64_t created_unix_ns;     // 80
  char job[kNameBytes];         // 88
  char node[kNameBytes];        // 152
  char host[kNameBytes];        // 216
  uint8_t reserved0[320 - 280];
  alignas(64) uint32_t state;   // 320
  int32_t exit_status;          // 324
  alignas(64) uint64_t heartbeat_ns;      // 384
  uint64_t heartbeat_count;               // 392
  alignas(64) uint64_t last_call_ns;      // 448
  uint64_t call_count;                    // 456
  uint64_t blocked_since_ns;              // 464
  uint64_t blocked_count;                 // 472
  alignas(64) uint64_t ring_head;         // 512
  uint64_t ring_dropped;                  // 520
  uint8_t reserved1[kHeaderBytes - 528];
};

static_assert(sizeof(SegmentHeader) == kHeaderBytes);
static_assert(offsetof(SegmentHeader, host) == 216);
static_assert(offsetof(SegmentHeader, state) == 320);
static_assert(offsetof(SegmentHeader, heartbeat_ns) == 384);
static_assert(offsetof(SegmentHeader, last_call_ns) == 448);
static_assert(offsetof(SegmentHeader, blocked_since_ns) == 464);
static_assert(offsetof(SegmentHeader, ring_head) == 512);

}  // namespace ft::shm::v1

#endif  // FT_SHM_LAYOUT_V1_H_

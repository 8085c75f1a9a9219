// The op kinds: the one vocabulary of what an op is, owned by the record format. libft.so
// writes a kind's value (CommSlot::enter_op, the low byte of an op record's a: records.h); the
// worker and the master carry its name in Redis values (proto::OpKind is this enum, and the
// JSON codec writes kOpKindNames' names). Values and names are part of both contracts:
// append, never renumber or rename (shm/tests/records_test.cc and proto/tests pin them).
// Header-only, so that proto/ uses it without linking ft_shm.
#ifndef FT_SHM_OP_KIND_H_
#define FT_SHM_OP_KIND_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/names.h"

namespace ft::shm {

enum class OpKind : uint32_t {
  kNone = 0,  // no op: a row whose communicator has entered none yet, an event not about an op
  kAllReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kBroadcast = 4,
  kBcast = 5,
  kReduce = 6,
  kAlltoAll = 7,
  kGather = 8,
  kScatter = 9,
  kSend = 10,
  kRecv = 11,
  // Never in a record: what a reader calls a kind its build does not know (a newer libft.so's).
  // Its value is reserved; a new record kind takes 12 or 14 and up.
  kOther = 13,
  kGraphLaunch = 20,  // a CUDA graph launch, timed as a whole (comm_id 0)
};

// The one name of each kind, as ftdump, the logs, Redis values (docs/redis-schema.md,
// CommRow.op) and the metrics' `op` label carry it. In this order the codec lists them when it
// refuses a name.
inline constexpr Named<OpKind> kOpKindNames[] = {
    {OpKind::kNone, "none"},          {OpKind::kAllReduce, "allreduce"},
    {OpKind::kAllGather, "allgather"}, {OpKind::kReduceScatter, "reducescatter"},
    {OpKind::kBroadcast, "broadcast"}, {OpKind::kBcast, "bcast"},
    {OpKind::kReduce, "reduce"},       {OpKind::kAlltoAll, "alltoall"},
    {OpKind::kGather, "gather"},       {OpKind::kScatter, "scatter"},
    {OpKind::kSend, "send"},           {OpKind::kRecv, "recv"},
    {OpKind::kGraphLaunch, "graphlaunch"}, {OpKind::kOther, "other"},
};
// Every kind, in the table's order.
inline constexpr auto kOpKinds = ValuesIn(kOpKindNames);

// "?" for a value outside the table (only a cast can make one).
constexpr const char* OpKindName(OpKind kind) { return NameIn(kOpKindNames, kind); }

// "" is not a name: the codec reads an empty optional op as kNone itself.
constexpr std::optional<OpKind> ParseOpKind(std::string_view name) { return ParseIn(kOpKindNames, name); }

// The kind of a record's value (CommSlot::enter_op, OpArgs::kind); kOther for one this build
// does not know, 13 included.
constexpr OpKind OpKindOfRecord(uint32_t value) {
  for (const Named<OpKind>& e : kOpKindNames) {
    if (static_cast<uint32_t>(e.value) == value && e.value != OpKind::kOther) return e.value;
  }
  return OpKind::kOther;
}

// A record's value by name: "op<N>" for one this build does not know (a newer libft.so's).
inline std::string OpKindName(uint32_t value) {
  const OpKind kind = OpKindOfRecord(value);
  return kind == OpKind::kOther ? "op" + std::to_string(value) : OpKindName(kind);
}

}  // namespace ft::shm

#endif  // FT_SHM_OP_KIND_H_

// What the master tells every worker of a job at once: one entry of the job's notify stream
// (Keys::Notify(), docs/redis-schema.md "Notices"). Workers block on that stream (and their
// node's command stream) with one XREAD instead of polling each published value, so a change
// reaches them in milliseconds and a calm job costs Redis almost nothing:
//   timeouts — a new timeout table is published (read Timeouts());
//   restore  — a new restore plan (read Restore());
//   secret   — the transfer secret was (re)created (read TransferSecret());
//   window   — an incident window opened (open=1): write the progress tables of the ranks it
//              names (ranks, RankRanges: the members of the window's communicators), or of every
//              rank when it names none, every FT_REPORT_INTERVAL until it closes (open=0), so
//              the master decides on fresh tables while the other ranks write theirs only on a
//              change of state. A window whose members grow is noticed again with the new set.
// A notice says what changed, never the value: a worker that misses one (Redis restarted,
// stream trimmed, worker reconnecting) finds the value at its next slow poll.
// Fields: kind, and for window: open ("1"/"0"), window (the window's first event id) and
// ranks (optional).
// Parsing takes foreign bytes: an unknown kind or a malformed field is refused by name.
#ifndef FT_PROTO_NOTICE_H_
#define FT_PROTO_NOTICE_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/rank_ranges.h"

namespace ft::proto {

enum class NoticeKind { kTimeouts, kRestore, kSecret, kWindow };

std::string_view NoticeKindName(NoticeKind kind);
bool ParseNoticeKind(std::string_view name, NoticeKind* out);

struct Notice {
  NoticeKind kind = NoticeKind::kTimeouts;
  bool open = false;   // window: opened (true) or closed
  std::string window;  // window: the id of the event that opened it
  // window: the ranks whose tables it needs; none named: every rank's (a master before ranks
  // were named, a window without a known membership, or more ranks than kMaxNoticeRanksBytes).
  std::optional<RankRanges> ranks;

  bool operator==(const Notice&) const = default;
};

// The stream entry's field/value list (what follows XADD <key> MAXLEN ~ <n> *; the XADD itself
// is schema::PostNotice).
std::vector<std::string> NoticeFields(const Notice& notice);
// From an entry's field/value list as XREAD returns it; unknown fields are ignored (a newer
// master may add some), an unknown kind or a bad value is kCorrupt naming it.
Status ParseNotice(std::span<const std::string> fields, Notice* out);

// The longest `ranks` a notice carries (every worker reads every notice): past it the master
// names none, and every rank writes.
inline constexpr size_t kMaxNoticeRanksBytes = 4096;

// A notice of `kind` with nothing else (every kind but window).
inline Notice NoticeOf(NoticeKind kind) {
  Notice n;
  n.kind = kind;
  return n;
}

}  // namespace ft::proto

#endif  // FT_PROTO_NOTICE_H_

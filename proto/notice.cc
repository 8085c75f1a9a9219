#include "proto/notice.h"

#include <array>
#include <utility>

namespace ft::proto {
namespace {

constexpr std::array<std::pair<NoticeKind, std::string_view>, 4> kKinds = {{
    {NoticeKind::kTimeouts, "timeouts"},
    {NoticeKind::kRestore, "restore"},
    {NoticeKind::kSecret, "secret"},
    {NoticeKind::kWindow, "window"},
}};

constexpr size_t kMaxFieldBytes = 256;  // a window id is a stream id; nothing legitimate is longer

}  // namespace

std::string_view NoticeKindName(NoticeKind kind) {
  for (const auto& [k, name] : kKinds) {
    if (k == kind) return name;
  }
  return "unknown";
}

bool ParseNoticeKind(std::string_view name, NoticeKind* out) {
  for (const auto& [k, n] : kKinds) {
    if (n == name) {
      *out = k;
      return true;
    }
  }
  return false;
}

std::vector<std::string> NoticeFields(const Notice& notice) {
  std::vector<std::string> fields{"kind", std::string(NoticeKindName(notice.kind))};
  if (notice.kind == NoticeKind::kWindow) {
    fields.insert(fields.end(), {"open", notice.open ? "1" : "0", "window", notice.window});
    if (notice.ranks) fields.insert(fields.end(), {"ranks", notice.ranks->Format()});
  }
  return fields;
}

Status ParseNotice(std::span<const std::string> fields, Notice* out) {
  if (fields.size() % 2 != 0) return Status::Corrupt("notice: an odd number of fields and values");
  Notice n;
  bool have_kind = false, have_open = false;
  for (size_t i = 0; i < fields.size(); i += 2) {
    const std::string& field = fields[i];
    const std::string& value = fields[i + 1];
    const size_t limit = field == "ranks" ? kMaxNoticeRanksBytes : kMaxFieldBytes;
    if (value.size() > limit) {
      return Status::Corrupt("notice: field " + field.substr(0, 32) + " is longer than " + std::to_string(limit) + " bytes");
    }
    if (field == "kind") {
      if (!ParseNoticeKind(value, &n.kind)) {
        return Status::Corrupt("notice: unknown kind \"" + value.substr(0, 32) + "\"");
      }
      have_kind = true;
    } else if (field == "open") {
      if (value != "0" && value != "1") return Status::Corrupt("notice: open is neither 0 nor 1");
      n.open = value == "1";
      have_open = true;
    } else if (field == "window") {
      n.window = value;
    } else if (field == "ranks") {
      RankRanges ranks;
      Status parsed = RankRanges::Parse(value, &ranks);
      if (!parsed.ok()) return Status::Corrupt("notice: " + std::string(parsed.message()));
      n.ranks = std::move(ranks);
    }
  }
  if (!have_kind) return Status::Corrupt("notice: no kind");
  if (n.kind == NoticeKind::kWindow && !have_open) return Status::Corrupt("notice: a window without open");
  *out = std::move(n);
  return Status::Ok();
}

}  // namespace ft::proto

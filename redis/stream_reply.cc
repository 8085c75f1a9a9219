#include "redis/stream_reply.h"

#include <charconv>

namespace ft::redis {

const std::string* StreamEntry::Get(std::string_view name) const {
  for (const auto& [field, value] : fields) {
    if (field == name) return &value;
  }
  return nullptr;
}

std::vector<std::string> StreamEntry::Flat() const {
  std::vector<std::string> flat;
  flat.reserve(2 * fields.size());
  for (const auto& [field, value] : fields) {
    flat.push_back(field);
    flat.push_back(value);
  }
  return flat;
}

size_t ParseStream(const Reply& reply, std::vector<StreamEntry>* out) {
  size_t skipped = 0;
  for (const Reply& entry : reply.elements()) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_array() ||
        entry[1].size() % 2 != 0) {
      ++skipped;
      continue;
    }
    StreamEntry e;
    e.id = entry[0].str();
    e.fields.reserve(entry[1].size() / 2);
    for (size_t i = 0; i + 1 < entry[1].size(); i += 2) {
      e.fields.emplace_back(entry[1][i].str(), entry[1][i + 1].str());
    }
    out->push_back(std::move(e));
  }
  return skipped;
}

bool ParseStreamId(std::string_view id, uint64_t* ms, uint64_t* seq) {
  const size_t dash = id.find('-');
  if (dash == std::string_view::npos) return false;
  uint64_t a = 0, b = 0;
  auto r1 = std::from_chars(id.data(), id.data() + dash, a);
  auto r2 = std::from_chars(id.data() + dash + 1, id.data() + id.size(), b);
  if (r1.ec != std::errc() || r1.ptr != id.data() + dash || r2.ec != std::errc() ||
      r2.ptr != id.data() + id.size() || dash == 0 || dash + 1 == id.size()) {
    return false;
  }
  *ms = a;
  *seq = b;
  return true;
}

}  // namespace ft::redis

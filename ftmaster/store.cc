#include "ftmaster/store.h"

#include <fmt/format.h>

#include <functional>

#include "common/log.h"
#include "proto/codec.h"
#include "schema/rank_hashes.h"

namespace ft::master {

bool BadValues::Report(std::string_view where, std::string_view raw, const Status& why) {
  ++count_;
  const uint64_t h = std::hash<std::string_view>()(where) * 31 + std::hash<std::string_view>()(raw);
  if (seen_.size() >= kMaxRemembered) seen_.clear();
  if (!seen_.insert(h).second) return false;
  FT_LOG(Warn, Master, "ignoring {} ({} bytes): {}; the value is skipped until its writer "
         "rewrites it (check that ftworker and ftmaster speak the same schema version)",
         where, raw.size(), why.message());
  return true;
}

std::optional<proto::JobState> ReadJobState(std::string_view raw, BadValues* bad) {
  if (raw.empty()) return std::nullopt;
  proto::JobState state;
  if (Status s = proto::DecodeJobState(raw, &state); !s.ok()) {
    bad->Report("master job_state", raw, s);
    return std::nullopt;
  }
  return state;
}

template <typename T>
void DecodedHash<T>::Load(const redis::Reply& reply, BadValues* bad) {
  changed_ = 0;
  if (!reply.is_array() || reply.size() % 2 != 0) {
    if (!reply.is_nil()) {
      bad->Report(what_, reply.DebugString().substr(0, 64),
                  Status::Corrupt("not a hash reply (wrong key type?)"));
    }
    return;
  }
  BeginPass();
  LoadPairs(reply, bad);
  EndPass();
}

template <typename T>
void DecodedHash<T>::BeginPass() {
  ++gen_;
  changed_ = 0;
}

template <typename T>
void DecodedHash<T>::LoadPairs(const redis::Reply& pairs, BadValues* bad) {
  if (!pairs.is_array() || pairs.size() % 2 != 0) {
    if (!pairs.is_nil()) {
      bad->Report(what_, pairs.DebugString().substr(0, 64),
                  Status::Corrupt("not a flat field/value array (wrong key type?)"));
    }
    return;
  }
  changed_fields_.clear();
  bool any = false;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    if (Take(pairs[i].str(), &pairs[i + 1].str(), bad)) any = true;
  }
  if (any) ++version_;
}

template <typename T>
void DecodedHash<T>::EndPass() {
  bool any = false;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->second.gen == gen_) {
      ++it;
      continue;
    }
    any = true;
    if (it->second.index >= 0) RemoveAt(it->second.index);
    it = slots_.erase(it);
  }
  if (any) ++version_;
}

template <typename T>
void DecodedHash<T>::LoadFields(const std::vector<std::string>& fields, const redis::Reply& reply,
                                BadValues* bad) {
  changed_ = 0;
  changed_fields_.clear();
  if (!reply.is_array() || reply.size() != fields.size()) {
    bad->Report(what_, reply.DebugString().substr(0, 64),
                Status::Corrupt(fmt::format("not an HMGET reply for {} fields", fields.size())));
    return;
  }
  changed_fields_.clear();
  bool any = false;
  for (size_t i = 0; i < fields.size(); ++i) {
    const redis::Reply& value = reply[i];
    if (Take(fields[i], value.is_string() ? &value.str() : nullptr, bad)) any = true;
  }
  if (any) ++version_;
}

template <typename T>
bool DecodedHash<T>::Take(const std::string& field, const std::string* raw, BadValues* bad) {
  if (raw == nullptr) {
    auto it = slots_.find(field);
    if (it == slots_.end()) return false;
    if (it->second.index >= 0) RemoveAt(it->second.index);
    slots_.erase(it);
    return true;
  }
  Slot& slot = slots_[field];
  const bool fresh_slot = slot.gen == 0;
  slot.gen = gen_ == 0 ? ++gen_ : gen_;
  if (!fresh_slot && slot.raw == *raw) return false;
  slot.raw = *raw;
  T value;
  Status s = schema::DecodeRankValue(field, *raw, &value);
  if (!s.ok()) {
    bad->Report(fmt::format("{} field {}", what_, field.substr(0, 32)), *raw, s);
    if (slot.index >= 0) {
      RemoveAt(slot.index);
      slot.index = -1;
    }
    return true;
  }
  ++changed_;
  changed_fields_.push_back(field);
  if (slot.index >= 0) {
    values_[static_cast<size_t>(slot.index)] = std::move(value);
  } else {
    slot.index = static_cast<int>(values_.size());
    values_.push_back(std::move(value));
    owners_.push_back(field);
  }
  return true;
}

template <typename T>
std::vector<const T*> DecodedHash<T>::ChangedValues() const {
  std::vector<const T*> out;
  out.reserve(changed_fields_.size());
  for (const std::string& field : changed_fields_) {
    auto it = slots_.find(field);
    if (it != slots_.end() && it->second.index >= 0) {
      out.push_back(&values_[static_cast<size_t>(it->second.index)]);
    }
  }
  return out;
}

template <typename T>
void DecodedHash<T>::RemoveAt(int index) {
  const auto i = static_cast<size_t>(index);
  const size_t last = values_.size() - 1;
  if (i != last) {
    values_[i] = std::move(values_[last]);
    owners_[i] = std::move(owners_[last]);
    slots_[owners_[i]].index = index;
  }
  values_.pop_back();
  owners_.pop_back();
}

template <typename T>
void DecodedHash<T>::Clear() {
  slots_.clear();
  values_.clear();
  owners_.clear();
  changed_ = 0;
  ++version_;
}

template class DecodedHash<proto::RankProgress>;
template class DecodedHash<proto::RankSummary>;
template class DecodedHash<proto::Membership>;
template class DecodedHash<proto::CkptCopy>;

}  // namespace ft::master

#include "redis/outbox.h"

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace ft::redis {

Outbox::Outbox(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

void Outbox::Append(Argv argv) {
  while (appends_.size() >= capacity_) {
    appends_.pop_front();
    ++dropped_;
  }
  appends_.push_back(std::move(argv));
}

void Outbox::Put(std::string slot, Argv argv) {
  auto it = slots_.find(slot);
  if (it != slots_.end()) {
    it->second = Slot{std::move(argv), ++puts_};
    ++coalesced_;
    return;
  }
  if (slots_.size() >= capacity_) {
    auto oldest = std::min_element(slots_.begin(), slots_.end(), [](const auto& a, const auto& b) {
      return a.second.updated < b.second.updated;
    });
    slots_.erase(oldest);
    ++dropped_;
  }
  slots_.emplace(std::move(slot), Slot{std::move(argv), ++puts_});
}

Status Outbox::Flush(Commands& client, size_t max_commands) {
  if (empty() || max_commands == 0) return Status::Ok();
  if (!client.connected()) {
    return Status::Unavailable("Redis at " + client.Where() + " is not connected; " +
                               std::to_string(pending()) + " writes wait in the outbox");
  }
  size_t n_appends = std::min(appends_.size(), max_commands);
  size_t n_slots = std::min(slots_.size(), max_commands - n_appends);
  std::vector<Argv> commands;
  commands.reserve(n_appends + n_slots);
  for (size_t i = 0; i < n_appends; ++i) commands.push_back(appends_[i]);
  std::vector<std::map<std::string, Slot>::iterator> sent_slots;
  sent_slots.reserve(n_slots);
  for (auto it = slots_.begin(); it != slots_.end() && sent_slots.size() < n_slots; ++it) {
    commands.push_back(it->second.argv);
    sent_slots.push_back(it);
  }

  std::vector<Reply> replies;
  Status io = client.PipelinePartial(commands, &replies);
  Status first_transient;
  std::string first_rejection;
  // keep[i]: entry i stays for the next flush (not answered, or refused for now).
  auto settle = [&](size_t i) -> bool {
    if (i >= replies.size()) return true;
    const Reply& r = replies[i];
    if (!r.is_error()) {
      ++delivered_;
      return false;
    }
    if (IsTransientServerError(r.str())) {
      if (first_transient.ok()) {
        first_transient = ServerErrorStatus(client.Where(), commands[i][0], r.str());
      }
      return true;
    }
    ++rejected_;
    if (first_rejection.empty()) first_rejection = commands[i][0] + ": " + r.str();
    return false;
  };

  std::deque<Argv> kept;
  for (size_t i = 0; i < n_appends; ++i) {
    if (settle(i)) kept.push_back(std::move(appends_[i]));
  }
  for (size_t i = n_appends; i < appends_.size(); ++i) kept.push_back(std::move(appends_[i]));
  appends_ = std::move(kept);
  for (size_t k = 0; k < sent_slots.size(); ++k) {
    if (!settle(n_appends + k)) slots_.erase(sent_slots[k]);
  }

  if (!first_rejection.empty()) {
    FT_LOG(Warn, Common,
           "Redis at {} refused a write for good, dropped it ({} so far): {}; a key of the job "
           "has the wrong type, the server is too old, or the Redis user may not write it "
           "(NOPERM: `ftmaster acl` prints each role's rules)",
           client.Where(), rejected_, first_rejection);
  }
  if (!io.ok()) return io;
  return first_transient;
}

}  // namespace ft::redis

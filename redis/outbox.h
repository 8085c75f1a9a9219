// Writes a daemon keeps while Redis is away, and sends when it is back.
//
// Two kinds of entries:
//  - Append(argv): ordered writes (XADD of an event, an acknowledgement). Delivered exactly in
//    the order appended; none is lost while at most `capacity` are pending. Beyond that the
//    OLDEST are dropped and counted (dropped()): the newest say most about the job now.
//  - Put(slot, argv): latest-value writes (HSET of a rank's progress). A newer Put for the same
//    slot replaces the pending one, so an outage of any length costs one entry per slot. At
//    most `capacity` slots are pending; beyond that the least recently updated is dropped.
//
// Flush(client) sends everything in one pipeline, appends first and in order, then the slots;
// what the server accepted is removed, the rest stays for the next Flush. Delivery is at least
// once: when a connection breaks after the server executed a command but before its reply
// arrived, that command is sent again (an event may appear twice; readers dedupe by content).
// A command the server refuses for good (WRONGTYPE, a syntax error) is removed and counted
// (rejected()), so one bad entry never blocks the queue; one refused for now (LOADING, OOM,
// READONLY) stays. Not thread-safe: the daemon's loop owns it.
#ifndef FT_REDIS_OUTBOX_H_
#define FT_REDIS_OUTBOX_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "redis/store.h"

namespace ft::redis {

class Outbox {
 public:
  // capacity >= 1 (0 is taken as 1): FT_REDIS_BUFFER for a worker.
  explicit Outbox(size_t capacity);

  void Append(Argv argv);
  void Put(std::string slot, Argv argv);

  // Sends at most `max_commands` pending entries (appends first) in one pipeline. OK when
  // every sent entry was accepted or refused for good; kUnavailable without sending when the
  // client is not connected; otherwise the first connection error or transient refusal.
  Status Flush(Commands& client, size_t max_commands = SIZE_MAX);

  size_t capacity() const { return capacity_; }
  size_t pending() const { return appends_.size() + slots_.size(); }
  size_t pending_appends() const { return appends_.size(); }
  size_t pending_puts() const { return slots_.size(); }
  bool empty() const { return pending() == 0; }

  uint64_t dropped() const { return dropped_; }      // lost to the capacity limit
  uint64_t rejected() const { return rejected_; }    // refused by the server for good
  uint64_t delivered() const { return delivered_; }  // accepted by the server
  uint64_t coalesced() const { return coalesced_; }  // Puts replaced by a newer one

 private:
  struct Slot {
    Argv argv;
    uint64_t updated = 0;  // Put counter at the last update, for eviction
  };

  size_t capacity_;
  std::deque<Argv> appends_;
  std::map<std::string, Slot> slots_;
  uint64_t puts_ = 0;
  uint64_t dropped_ = 0;
  uint64_t rejected_ = 0;
  uint64_t delivered_ = 0;
  uint64_t coalesced_ = 0;
};

}  // namespace ft::redis

#endif  // FT_REDIS_OUTBOX_H_

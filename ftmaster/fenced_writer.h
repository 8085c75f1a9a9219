// ft::master::FencedWriter: every write the master makes while leading goes through here, and
// each is fenced by the lease key on the server (redis::Store's fenced operations, one Lua
// script each on a real Redis): the writes run only while Keys::Leader() still holds this
// master's id, atomically, so a leader that has not yet noticed its loss (a pause, a
// partition) cannot write. Two kinds:
//   - Run(commands): a list of plain writes, all or none;
//   - WriteIncidents(...): the exactly-once write of incidents. Per incident, `HSETNX master
//     decided:<id>` is the gate: only its winner XADDs the incident; on any win the evicted
//     nodes and the on-win fields (the action) are written too; `always` fields and `del`
//     deletions are written either way.
// A refused (fenced-out) write is counted in *fenced_out and logged. Not thread-safe: the
// master's loop owns it.
#ifndef FT_FTMASTER_FENCED_WRITER_H_
#define FT_FTMASTER_FENCED_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "proto/keys.h"
#include "proto/messages.h"
#include "redis/store.h"

namespace ft::master {

class FencedWriter {
 public:
  // All pointers outlive the writer. `id`: this master's lease value.
  FencedWriter(redis::Store* store, const proto::Keys* keys, std::string id,
               uint64_t* fenced_out);

  // Writes `commands` atomically iff this master holds the lease key. False when fenced out
  // or Redis failed.
  bool Run(const std::vector<redis::Argv>& commands);

  // The incident script: per incident HSETNX decided:<id>, XADD only when won; on any win
  // also SADD evict and HSET on_win; always HSET always / HDEL del. Returns per-incident
  // wins, or nullopt when fenced out / failed.
  std::optional<std::vector<bool>> WriteIncidents(
      const std::vector<proto::Incident>& incidents, int64_t unix_ms,
      const std::vector<std::string>& evict,
      const std::vector<std::pair<std::string, std::string>>& on_win,
      const std::vector<std::pair<std::string, std::string>>& always,
      const std::vector<std::string>& del);

 private:
  redis::Store* store_;
  const proto::Keys* keys_;
  std::string id_;
  uint64_t* fenced_out_;
};

}  // namespace ft::master

#endif  // FT_FTMASTER_FENCED_WRITER_H_

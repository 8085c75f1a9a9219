// ft::worker::MasterWatch: how a worker hears the master without polling. One thread, on a
// connection of its own, blocks in one XREAD on the node's command stream and the job's
// notify stream (proto/notice.h); what arrives is kept as news the daemon's loop takes at its
// next tick (FT_WORKER_TICK). The daemon then reads what changed (commands, timeouts, plan,
// secret) and still polls each slowly, for a notice it may have missed; while the watch is not
// reading (not connected yet, Redis away) the daemon falls back to its quick polls and writes
// every progress table at every report, as workers did before notices.
//
// After every (re)connection the watch starts from the streams' newest entries and reports
// `everything`: whatever changed while it was not reading is read once.
//
// Thread-safe: Take() and listening() are called by the daemon's thread, the rest runs on the
// watch's own. The thread shares its state with the object through a shared_ptr and is
// detached at destruction: it may sit in its blocking read for up to block_ms, and a stopping
// worker need not wait for that.
#ifndef FT_FTWORKER_MASTER_WATCH_H_
#define FT_FTWORKER_MASTER_WATCH_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "proto/keys.h"
#include "proto/rank_ranges.h"
#include "redis/store.h"

namespace ft::worker {

struct MasterNews {
  bool everything = false;  // read everything (a (re)connection: notices may have been missed)
  bool commands = false;    // the node's command stream has new entries
  bool timeouts = false;
  bool restore = false;
  bool secret = false;
  std::optional<bool> window_open;  // the newest window notice: open or closed
  std::string window;               // its window id
  std::optional<proto::RankRanges> window_ranks;  // the ranks it names; none: every rank

  bool any() const { return everything || commands || timeouts || restore || secret || window_open; }
};

class MasterWatch {
 public:
  // `store` is the watch's own connection (its I/O timeout must exceed block).
  MasterWatch(const proto::Keys& keys, std::string node, std::unique_ptr<redis::Store> store,
              std::chrono::milliseconds block);
  ~MasterWatch();
  MasterWatch(const MasterWatch&) = delete;
  MasterWatch& operator=(const MasterWatch&) = delete;

  // What arrived since the last call.
  MasterNews Take();
  // True from the moment both streams could be read on a working connection (not only once
  // the first blocking read returned), until a read fails.
  bool listening() const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_MASTER_WATCH_H_

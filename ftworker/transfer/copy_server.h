// ft::worker::CopyProvider: the regions a worker's transfer server (rdma::Server) hands to
// authenticated peers — this node's committed, untorn checkpoint copies, by the names of
// ftworker/transfer/region_name.h:
//
//   arena/<step>/<rank>  the rank's host arena, mapped read-only. Only an arena the keeper
//                        found for one of this node's ranks (CkptKeeper::ArenaPathOf), and
//                        only while it still holds that step: the arena is re-read at every
//                        open, and a save that overwrites it while a peer reads makes the
//                        region's StillValid() false (the server then refuses further reads).
//                        The mapping stays open across opens and is re-opened when the file
//                        was replaced (a rank that re-registered with another geometry).
//   replica/<step>/<rank> this node's buddy copy of another node's rank (ftworker/prefetch/replicator.h),
//                        served like an arena (re-read at every open, the same checks), found
//                        through replica_path_of.
//   local/<step>/<rank>  the copy in the node's local tier (FT_CKPT_DIR), its data file
//                        mapped read-only. Tier files are replaced by rename, never rewritten,
//                        so a mapped copy never changes under a reader.
//
// meta() is the copy's manifest (ckpt::EncodeManifest), which the puller verifies every chunk
// against. Anything else is refused: a malformed name InvalidArgument; a copy this node does
// not hold, of another job, torn, or no longer of that step NotFound.
//
// Threads: Open() is called from the server's I/O threads, concurrently.
#ifndef FT_FTWORKER_COPY_SERVER_H_
#define FT_FTWORKER_COPY_SERVER_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/status.h"
#include "ftworker/transfer/region_name.h"
#include "jitckpt/arena.h"
#include "jitckpt/tier.h"
#include "transfer_engine/transfer.h"

namespace ft::worker {

struct CopyProviderOptions {
  std::string job;
  std::string local_dir;  // FT_CKPT_DIR; empty: no local tier, local/... is NotFound
  // The arena file holding this node's copy (step, rank), "" when none (CkptKeeper::ArenaPathOf).
  std::function<std::string(ckpt::CopyId)> arena_path_of;
  // Every arena file of this node's ranks now (CkptKeeper::ArenaPaths): Warm() maps them ahead
  // of any request, so a peer's restore never waits for a mapping or a registration. Empty: none.
  std::function<std::vector<std::string>()> arena_paths;
  // The buddy copy file holding (step, rank), "" when none (Replicator::ReplicaPathOf). Empty: none.
  std::function<std::string(ckpt::CopyId)> replica_path_of;
  // Called when an arena's data region is mapped, and when its mapping's last user let go: a
  // fast path registers the memory with its NIC there, once per arena
  // (transfer_engine/verbs/verbs_transport.h, VerbsServer::Register and Forget). `unmapped` also
  // hears of every local-tier mapping going away (a fast path registers those at their first
  // offer). Empty: nothing to do.
  std::function<void(const uint8_t* data, uint64_t bytes)> mapped;
  std::function<void(const uint8_t* data, uint64_t bytes)> unmapped;
};

class CopyProvider : public rdma::RegionProvider {
 public:
  explicit CopyProvider(CopyProviderOptions options);

  Status Open(std::string_view name, std::shared_ptr<const rdma::Region>* out) override;

  // Lets go of the mappings of arena files that were removed or replaced since they were
  // mapped: a mapping pins an unlinked file's pages in memory (a tmpfs arena of many GB) until
  // it is unmapped. Regions still being read keep theirs until they are done. Any thread;
  // the transfer service calls it about once a second.
  void Prune();
  // Maps the arenas of options.arena_paths not mapped yet (or replaced). Any thread; the
  // transfer service calls it about once a second.
  void Warm();
  // Arena files currently kept mapped (tests).
  size_t mapped_arenas();

 private:
  // One read-only mapping of an arena file, shared by the regions opened from it: a replaced
  // file's mapping lives on until the last reader lets go.
  struct Mapping {
    ckpt::Arena arena;
    dev_t dev = 0;
    ino_t ino = 0;
    std::function<void(const uint8_t*, uint64_t)> unmapped;
    ~Mapping() {
      if (unmapped && arena.is_open()) unmapped(arena.slots_data(), arena.slots_bytes());
    }
  };

  Status OpenArena(ckpt::CopyId id, CopyPlace place, std::shared_ptr<const rdma::Region>* out);
  Status OpenLocal(ckpt::CopyId id, std::shared_ptr<const rdma::Region>* out);
  // The mapping of `path` as it is now: the kept one, or a fresh one when the file changed.
  Status MappingOf(const std::string& path, std::shared_ptr<const Mapping>* out);

  const CopyProviderOptions options_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<const Mapping>> mappings_ GUARDED_BY(mu_);  // by path
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_COPY_SERVER_H_

// ft::worker::SegmentDiscovery: finds one job's segments on this node. Scan() lists the shm
// directory for names with shm::SegmentPrefix(job) and attaches those not seen before, also a
// name seen before whose file was replaced (another inode: a new incarnation that reused the
// name). shm::Segment::Attach validates each; a file that stays invalid for `settle_ns` (a
// segment being created is briefly too small or without its magic) is logged once, with what
// to do, and ignored until it changes. Segments of another job that shares the sanitized
// prefix, or of another node's ftworker (several workers on one host simulate several nodes),
// are skipped silently. Reclaim() unlinks the segment of a process that is gone, once its
// monitor has reported the death. A segment its process never finished making (killed between
// shm_open and the header's last word) is removed once settle_ns passed and that process is
// gone; nothing else would ever remove it.
//
// Trust: any local user can create a file with the job's prefix. A segment is attached only
// when its file belongs to the worker's uid (or `owner_uid`) and is writable by no one else,
// and its header's pid and rank are the ones its name encodes. Its process is then verified
// (ProcessProbe::Verify: owned by that uid, no younger than the segment) and a pidfd kept:
// the only way the worker ever signals it. A process that cannot be found (gone already, or
// in another pid namespace) leaves the segment attached but unverified: read, never
// signalled. A process that is someone else's gets the segment refused.
//
// Attach uses shm_open, which resolves names in /dev/shm on Linux; `dir` only changes where
// names are listed (a test may list a copy). Not thread-safe.
#ifndef FT_FTWORKER_SEGMENT_DISCOVERY_H_
#define FT_FTWORKER_SEGMENT_DISCOVERY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "ftworker/monitor/process_probe.h"
#include "shm/segment.h"

namespace ft::worker {

struct DiscoveryOptions {
  std::string job;
  std::string node;                     // only segments whose header names this node; empty: any
  std::string dir = "/dev/shm";
  uint64_t scan_interval_ns = 200'000'000;
  uint64_t settle_ns = 2'000'000'000;   // how long a file may be invalid before it is ignored
  int64_t owner_uid = -1;               // the uid segments must belong to; -1: this process's euid
  ProcessProbe* probe = nullptr;        // nullptr: the system's
};

struct AttachedSegment {
  std::unique_ptr<shm::Segment> segment;
  uint64_t inode = 0;
  VerifiedProcess process;   // invalid when the process could not be found (see above)
  std::string unverified;    // why not, when invalid
};

class SegmentDiscovery {
 public:
  explicit SegmentDiscovery(DiscoveryOptions options);

  // Lists the directory when scan_interval_ns passed since the last listing (or `force`) and
  // returns the segments attached now.
  std::vector<AttachedSegment> Scan(uint64_t now_ns, bool force = false);

  // Unlinks segment `name` ("/ft.<job>.r<rank>.p<pid>") if it is still the file attached
  // (`inode`); a file already gone is fine.
  Status Reclaim(const std::string& name, uint64_t inode);

  // Files currently ignored as invalid (each was logged once).
  size_t ignored() const;

 private:
  struct Known {
    uint64_t inode = 0;
    enum class Kind { kAttached, kForeign, kInvalid, kSettling } kind = Kind::kSettling;
    uint64_t first_seen_ns = 0;
    bool logged = false;  // a segment stuck in initialization was reported
  };

  // Owner, mode, name and process checks of an attached segment; an error refuses it.
  Status CheckTrust(const std::string& file, const shm::Segment& segment, AttachedSegment* out);
  // After settle_ns: unlinks a file of the worker's uid that Attach refused (`attached`) because
  // its process never finished making it, when that process is gone. True when removed.
  bool RemoveIfAbandoned(const std::string& file, const std::string& path, const Status& attached);

  DiscoveryOptions options_;
  uint32_t owner_uid_;
  std::string prefix_;  // file name prefix, without the leading '/'
  uint64_t last_scan_ns_ = 0;
  bool scanned_ = false;
  std::map<std::string, Known> known_;  // by file name
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_SEGMENT_DISCOVERY_H_

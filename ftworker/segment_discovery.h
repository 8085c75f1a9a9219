// ft::worker::SegmentDiscovery: finds one job's segments on this node. Scan() lists the shm
// directory for names with shm::SegmentPrefix(job) and attaches those not seen before, also a
// name seen before whose file was replaced (another inode: a new incarnation that reused the
// name). shm::Segment::Attach validates each; a file that stays invalid for `settle_ns` (a
// segment being created is briefly too small or without its magic) is logged once, with what
// to do, and ignored until it changes. Segments of another job that shares the sanitized
// prefix, or of another node's ftworker (several workers on one host simulate several nodes),
// are skipped silently. Reclaim() unlinks the segment of a process that is gone, once its
// monitor has reported the death.
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
#include "shm/segment.h"

namespace ft::worker {

struct DiscoveryOptions {
  std::string job;
  std::string node;                     // only segments whose header names this node; empty: any
  std::string dir = "/dev/shm";
  uint64_t scan_interval_ns = 200'000'000;
  uint64_t settle_ns = 2'000'000'000;   // how long a file may be invalid before it is ignored
};

struct AttachedSegment {
  std::unique_ptr<shm::Segment> segment;
  uint64_t inode = 0;
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

  DiscoveryOptions options_;
  std::string prefix_;  // file name prefix, without the leading '/'
  uint64_t last_scan_ns_ = 0;
  bool scanned_ = false;
  std::map<std::string, Known> known_;  // by file name
};

}  // namespace ft::worker

#endif  // FT_FTWORKER_SEGMENT_DISCOVERY_H_

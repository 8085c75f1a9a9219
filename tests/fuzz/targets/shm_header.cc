// A segment's header as a worker reads it from a file anyone could have planted in /dev/shm
// (shm/segment.h, ValidateHeader): hostile bytes of any length are refused with a message and a
// code a caller handles (kCorrupt, or kUnsupported for a newer layout), never read past `size`.
#include "shm/segment.h"
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> aligned = ft::fuzz::AlignedCopy(data, size);
  ft::Status status = ft::shm::ValidateHeader(aligned.data(), size);
  if (status.ok()) {
    ft::fuzz::Accepted();
    return 0;
  }
  ft::fuzz::Refused(status);
  return 0;
}

ft::fuzz::TargetInfo FuzzTargetInfo() {
  ft::fuzz::TargetInfo info;
  info.name = "shm_header";
  // The seed: a segment as libft.so creates it, copied out of /dev/shm and removed.
  ft::shm::SegmentOptions options;
  options.ring_capacity = 64;
  options.comm_slots = 4;
  ft::shm::Identity identity;
  identity.job = "fuzz" + std::to_string(getpid());
  identity.node = "node7";
  identity.host = "hostA";
  identity.global_rank = 3;
  identity.local_rank = 3;
  identity.world_size = 8;
  std::unique_ptr<ft::shm::Segment> segment;
  ft::Status created =
      ft::shm::Segment::Create(ft::shm::SegmentName(identity.job, 3, getpid()), identity, getpid(), options, &segment);
  if (!created.ok()) {
    std::fprintf(stderr, "fuzz shm_header: cannot create the seed segment: %s\n", created.ToString().c_str());
    std::exit(2);
  }
  const char* base = reinterpret_cast<const char*>(segment->header());
  info.seeds = {std::string(base, base + segment->size())};
  (void)segment->Remove();
  // The static fields (magic, version, sizes, offsets, the ring's geometry) are the first 64
  // bytes; the identity and live fields follow up to 320.
  info.mutate.hot_prefix = 64;
  info.mutate.max_edits = 4;
  info.random_max_bytes = 20000;
  info.random_start = std::string(reinterpret_cast<const char*>(&ft::shm::kMagic), 8);
  info.mutations = 20000;
  info.min_accepted = 100;   // a byte of the live part rewritten: still a valid header
  info.min_rejected = 5000;
  return info;
}

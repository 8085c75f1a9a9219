// A segment with a unique name for one test, removed at the end of the test.
#ifndef FT_SHM_TESTS_TEST_SEGMENT_H_
#define FT_SHM_TESTS_TEST_SEGMENT_H_

#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "shm/segment.h"

namespace ft::shm {

inline std::string UniqueTestJob() {
  static std::atomic<int> counter{0};
  return "shmtest" + std::to_string(getpid()) + "_" + std::to_string(counter++);
}

class ScopedSegment {
 public:
  explicit ScopedSegment(SegmentOptions options = {}, int rank = 3) {
    Identity identity;
    identity.job = UniqueTestJob();
    identity.node = "node7";
    identity.host = "hostA";
    identity.global_rank = rank;
    identity.local_rank = rank % 4;
    identity.world_size = 8;
    name_ = SegmentName(identity.job, rank, getpid());
    Status status = Segment::Create(name_, identity, getpid(), options, &writer_);
    EXPECT_TRUE(status.ok()) << status.ToString();
  }
  ~ScopedSegment() {
    if (writer_) (void)writer_->Remove();
  }
  Segment& writer() { return *writer_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::unique_ptr<Segment> writer_;
};

}  // namespace ft::shm

#endif  // FT_SHM_TESTS_TEST_SEGMENT_H_

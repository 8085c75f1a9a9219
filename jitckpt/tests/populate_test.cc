#include "jitckpt/populate.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ft::ckpt {
namespace {

// A shared mapping of a tmpfs file holding `bytes` of a pattern (written with pwrite, so no page
// of it is mapped here yet).
class PopulateTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kBytes = (8ull << 20) + 3 * 4096;  // not a multiple of 2 MiB

  void SetUp() override {
    path_ = "/dev/shm/ft-populate-test." + std::to_string(getpid());
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd_, 0);
    pattern_.resize(kBytes);
    for (size_t i = 0; i < kBytes; ++i) pattern_[i] = static_cast<uint8_t>(i * 131 + 7);
    ASSERT_EQ(pwrite(fd_, pattern_.data(), kBytes, 0), static_cast<ssize_t>(kBytes));
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<uint8_t*>(p);
  }
  void TearDown() override {
    if (base_ != nullptr) munmap(base_, kBytes);
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }

  // KiB of the mapping this process has mapped (its Rss in /proc/self/smaps: pages in this
  // process's page tables, not merely in the page cache, which a tmpfs file always is).
  uint64_t MappedKiB() const {
    std::ifstream smaps("/proc/self/smaps");
    char head[32];
    std::snprintf(head, sizeof(head), "%lx-", reinterpret_cast<unsigned long>(base_));
    bool in = false;
    for (std::string line; std::getline(smaps, line);) {
      if (line.rfind(head, 0) == 0) in = true;
      if (in && line.rfind("Rss:", 0) == 0) return std::stoull(line.substr(4));
    }
    ADD_FAILURE() << "no mapping at " << head << " in /proc/self/smaps";
    return 0;
  }

  std::string path_;
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  std::vector<uint8_t> pattern_;
};

TEST_F(PopulateTest, EveryPageIsMappedAndNoByteChanges) {
  EXPECT_EQ(MappedKiB(), 0u);  // written with pwrite: nothing mapped here yet
  for (int threads : {1, 3, 64}) {  // 64: more threads than 2 MiB pieces
    SCOPED_TRACE(threads);
    PopulateForWrite(base_, kBytes, threads);
    EXPECT_EQ(MappedKiB(), kBytes / 1024);
    EXPECT_EQ(std::memcmp(base_, pattern_.data(), kBytes), 0);
  }
}

TEST_F(PopulateTest, NothingToDoIsFine) {
  PopulateForWrite(nullptr, kBytes);
  PopulateForWrite(base_, 0);
  EXPECT_EQ(MappedKiB(), 0u);
  EXPECT_EQ(std::memcmp(base_, pattern_.data(), kBytes), 0);
}

// TouchPages reads: every page of a read-only mapping is mapped by it (a write would fault), and
// nothing changes.
TEST_F(PopulateTest, TouchingMapsEveryPageOfAReadOnlyMappingAndChangesNothing) {
  munmap(base_, kBytes);
  void* p = mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, fd_, 0);
  ASSERT_NE(p, MAP_FAILED);
  base_ = static_cast<uint8_t*>(p);
  EXPECT_EQ(MappedKiB(), 0u);
  TouchPages(base_, kBytes);
  EXPECT_EQ(MappedKiB(), kBytes / 1024);
  EXPECT_EQ(std::memcmp(base_, pattern_.data(), kBytes), 0);
  TouchPages(nullptr, kBytes);  // nothing to touch
}

}  // namespace
}  // namespace ft::ckpt

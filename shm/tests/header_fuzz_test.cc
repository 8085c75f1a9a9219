// Every static field of a segment header is checked, and garbage files planted in /dev/shm are
// refused by Attach. Mutated and truncated headers are the fuzz target
// tests/fuzz/targets/shm_header.cc (CTest fuzz.shm_header).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/tests/test_segment.h"

namespace ft::shm {
namespace {

std::vector<uint8_t> ValidImage() {
  SegmentOptions options;
  options.ring_capacity = 64;
  options.comm_slots = 4;
  ScopedSegment seg(options);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(seg.writer().header());
  return std::vector<uint8_t>(base, base + seg.writer().size());
}

TEST(HeaderFuzzTest, EveryStaticFieldIsChecked) {
  std::vector<uint8_t> valid = ValidImage();
  auto corrupt = [&](size_t offset, uint32_t value) {
    std::vector<uint8_t> image = valid;
    std::memcpy(&image[offset], &value, sizeof(value));
    return ValidateHeader(image.data(), image.size());
  };
  EXPECT_EQ(corrupt(0, 0).code(), StatusCode::kCorrupt);                  // magic
  EXPECT_EQ(corrupt(8, kLayoutVersion + 1).code(), StatusCode::kUnsupported);  // version
  EXPECT_EQ(corrupt(8, 0).code(), StatusCode::kUnsupported);                   // before version 1
  EXPECT_EQ(corrupt(12, 100).code(), StatusCode::kCorrupt);               // header bytes
  EXPECT_EQ(corrupt(16, 1).code(), StatusCode::kCorrupt);                 // segment bytes
  EXPECT_EQ(corrupt(24, 0).code(), StatusCode::kCorrupt);                 // control offset
  EXPECT_EQ(corrupt(28, 0x7fffffff).code(), StatusCode::kCorrupt);        // comm table offset
  EXPECT_EQ(corrupt(32, 0x7fffffff).code(), StatusCode::kCorrupt);        // comm slots
  EXPECT_EQ(corrupt(36, 128).code(), StatusCode::kCorrupt);               // slot bytes
  EXPECT_EQ(corrupt(40, 0xffffff00).code(), StatusCode::kCorrupt);        // ring offset
  EXPECT_EQ(corrupt(48, 63).code(), StatusCode::kCorrupt);                // capacity not 2^k
  EXPECT_EQ(corrupt(48, 1u << 30).code(), StatusCode::kCorrupt);          // ring past the end
  EXPECT_EQ(corrupt(52, 32).code(), StatusCode::kCorrupt);                // record bytes
  EXPECT_EQ(corrupt(320, 17).code(), StatusCode::kCorrupt);               // state
}

TEST(HeaderFuzzTest, GarbageFilesInDevShmAreRejectedByAttach) {
  std::mt19937_64 rng(7);
  std::string name = "/ft." + UniqueTestJob() + ".r0.p1";
  for (int iteration = 0; iteration < 50; ++iteration) {
    int fd = shm_open(name.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    std::vector<uint8_t> bytes(rng() % 20000);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    if (bytes.size() >= 8 && rng() % 2) std::memcpy(bytes.data(), &kMagic, 8);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(fd);
    std::unique_ptr<Segment> reader;
    Status status = Segment::Attach(name, &reader);
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(reader, nullptr);
  }
  shm_unlink(name.c_str());
}

}  // namespace
}  // namespace ft::shm

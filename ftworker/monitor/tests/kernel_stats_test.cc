#include "ftworker/monitor/kernel_stats.h"

#include <gtest/gtest.h>

#include <cstring>

#include "shm/records.h"

namespace ft::worker {
namespace {

using shm::RecordType;

shm::Record Rec(RecordType type, uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
  shm::Record r{};
  r.type = static_cast<uint16_t>(type);
  r.a = a;
  r.b = b;
  r.c = c;
  r.d = d;
  return r;
}

shm::Record Name(uint64_t stub, const char* name) {
  char head[16] = {};
  std::memcpy(head, name, std::min<size_t>(std::strlen(name), 16));
  uint64_t c, d;
  std::memcpy(&c, head, 8);
  std::memcpy(&d, head + 8, 8);
  return Rec(RecordType::kKernelName, stub, 0, c, d);
}

TEST(KernelStats, SamplesAreNamedThroughStubsAndHandles) {
  KernelStats k;
  EXPECT_TRUE(k.OnRecord(Name(0x1000, "_Z7computePfi")));
  EXPECT_TRUE(k.OnRecord(Name(0x2000, "_Z9optimizerPfS_")));  // longer than 16: its head
  EXPECT_TRUE(k.OnRecord(Rec(RecordType::kKernelHandle, 0xbeef, 0x2000)));
  for (uint64_t ms : {3, 1, 2}) EXPECT_TRUE(k.OnRecord(Rec(RecordType::kKernelSample, 0x1000, ms * 1000000)));
  EXPECT_TRUE(k.OnRecord(Rec(RecordType::kKernelSample, 0xbeef, 5000000)));  // by handle
  EXPECT_TRUE(k.OnRecord(Rec(RecordType::kKernelSample, 0x3000, 1000000)));  // never named
  auto samples = k.TakeSamples();
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].name, "0x3000");
  EXPECT_EQ(samples[1].name, "_Z7computePfi");
  EXPECT_EQ(samples[1].count, 3u);
  EXPECT_DOUBLE_EQ(samples[1].p50_ms, 2);
  EXPECT_DOUBLE_EQ(samples[1].max_ms, 3);
  EXPECT_EQ(samples[2].name, "_Z9optimizerPfS_");
  EXPECT_DOUBLE_EQ(samples[2].max_ms, 5);
  EXPECT_TRUE(k.TakeSamples().empty()) << "a new window";
}

TEST(KernelStats, LaunchesAreTheDeltasOfTheWindow) {
  KernelStats k;
  k.OnRecord(Rec(RecordType::kKernelCount, 0x10, 100, 100));
  k.OnRecord(Rec(RecordType::kKernelCount, 0x20, 7, 7));
  EXPECT_EQ(k.TakeLaunches(), 107u);
  k.OnRecord(Rec(RecordType::kKernelCount, 0x10, 150, 50));
  EXPECT_EQ(k.TakeLaunches(), 50u);
  EXPECT_EQ(k.TakeLaunches(), 0u);
}

TEST(KernelStats, OtherRecordsAndHostileBytesAreSafe) {
  KernelStats k;
  EXPECT_FALSE(k.OnRecord(Rec(RecordType::kOpEnter, 1)));
  EXPECT_FALSE(k.OnRecord(Rec(static_cast<RecordType>(999), 1)));
  shm::Record junk = Rec(RecordType::kKernelName, 0x1000, 0, 0x0a0b0c0d0e0f1011ull, ~0ull);
  EXPECT_TRUE(k.OnRecord(junk));
  k.OnRecord(Rec(RecordType::kKernelSample, 0x1000, 1000000));
  auto samples = k.TakeSamples();
  ASSERT_EQ(samples.size(), 1u);
  for (char ch : samples[0].name) EXPECT_TRUE(ch > 0x20 && ch < 0x7f) << int(ch);
  // Bounded: more kernels than a window keeps.
  for (uint64_t i = 0; i < 2 * KernelStats::kMaxWindowKernels; ++i) {
    k.OnRecord(Rec(RecordType::kKernelSample, 0x5000 + i, 1000));
  }
  EXPECT_EQ(k.TakeSamples().size(), KernelStats::kMaxWindowKernels);
}

}  // namespace
}  // namespace ft::worker

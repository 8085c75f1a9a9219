// Random mutations of a valid segment, written under /dev/shm with the job's prefix, fed to
// discovery and the monitors: nothing crashes, a file that is not a valid segment is ignored
// with one clear message, a valid one with garbage inside is read without harm.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "ftworker/monitor/node_monitor.h"
#include "ftworker/monitor/tests/test_util.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

TEST(Fuzz, MutatedSegmentFilesAreIgnoredOrReadSafely) {
  LogCapture logs;
  FakeProbe probe;
  std::string job = UniqueJob("fuzz");
  const uint64_t t0 = MonoNs();
  std::string valid;
  {
    FakeRank r(job, 0, 3'900'100);
    r.CommInit(0xabc, 0, 2);
    r.P2PSlot(0xabc, true);
    for (uint64_t s = 1; s <= 50; ++s) r.Collective(0xabc, s, 1, 4096, t0 + s * kMs, 0, kMs / 2);
    r.Enter(0xabc, 51, 1, 4096, t0 + 60 * kMs);
    r.Start(0xabc, 51, 1, t0 + 60 * kMs);
    r.Error(2, 3, 5);
    std::ifstream in("/dev/shm" + r.name(), std::ios::binary);
    valid.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(valid.size(), 8192u);

  NodeMonitor m(MonitorOptions(job, &probe));
  proto::TimeoutTable table;
  table.version = 1;
  table.default_ms = 1;
  m.SetTimeouts(table);

  std::mt19937_64 rng(20241122);
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  size_t ignored = 0, attached = 0, foreign = 0;
  uint64_t t = t0;
  for (int i = 0; i < 300; ++i) {
    std::string bytes = valid;
    const int32_t rank = 1000 + i;  // the rank the file's name claims, as libft.so writes it
    std::memcpy(&bytes[56], &rank, sizeof(rank));
    switch (i % 6) {
      case 0:  // a few bytes of the header's static part
        for (int k = 0, n = 1 + static_cast<int>(pick(4)); k < n; ++k) bytes[pick(320)] = static_cast<char>(rng());
        break;
      case 1:  // truncated
        bytes.resize(pick(bytes.size()));
        break;
      case 2:  // extended
        bytes.append(1 + pick(10000), static_cast<char>(rng()));
        break;
      case 3:  // the live header fields, the control page and the comm table
        for (int k = 0; k < 64; ++k) bytes[320 + pick(8192 + 4096 - 320)] = static_cast<char>(rng());
        break;
      case 4:  // records
        for (int k = 0; k < 2000; ++k) bytes[12288 + pick(bytes.size() - 12288)] = static_cast<char>(rng());
        break;
      default:  // anywhere
        for (int k = 0; k < 200; ++k) bytes[pick(bytes.size())] = static_cast<char>(rng());
        break;
    }
    std::string name = shm::SegmentName(job, 1000 + i, 3'900'100);
    {
      std::ofstream out("/dev/shm" + name, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    size_t lines_before = logs.Count({name.substr(1)});
    std::vector<proto::Event> events;
    for (int k = 0; k < 3; ++k) {
      t += 500 * kMs;
      m.Tick(t, static_cast<int64_t>(t / kMs), &events);
      (void)m.Progress();
      (void)m.Memberships();
      (void)m.TakeSummaries(0);
    }
    bool was_ignored = logs.Count({"ignored", name.substr(1)}) + logs.Count({"not monitored yet", name.substr(1)}) > 0;
    bool was_attached = logs.Count({"monitoring rank", name}) + logs.Count({"new incarnation", name}) > 0;
    EXPECT_FALSE(was_ignored && was_attached) << name;
    if (was_ignored) {
      ++ignored;
      EXPECT_EQ(logs.Count({name.substr(1)}), 1u) << "one clear message per file";
    } else if (was_attached) {
      ++attached;
    } else {
      ++foreign;  // job or node field mutated: another worker's, skipped silently
      EXPECT_EQ(logs.Count({name.substr(1)}), lines_before);
    }
    unlink(("/dev/shm" + name).c_str());
  }
  EXPECT_GT(ignored, 100u);
  EXPECT_GT(attached, 50u);
  RecordProperty("ignored", static_cast<int>(ignored));
  RecordProperty("attached", static_cast<int>(attached));
  RecordProperty("foreign", static_cast<int>(foreign));
}

}  // namespace
}  // namespace ft::worker

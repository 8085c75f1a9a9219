// ft::Seqlock under a writer and readers hammering it: no torn copy is ever accepted, a reader
// that accepts a version sees what the writer did before publishing it (ThreadSanitizer checks
// that part: `make tsan` runs this suite), and the same holds across two processes sharing
// the memory. Each run goes on until its readers met torn copies (which Read must refuse), so
// a passing run proves reads and writes overlapped.
#include "common/seqlock.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ft {
namespace {

// Wide enough that a copy takes a while: a reader racing the writer has room to tear.
constexpr int kFields = 16;

// Zero for version 0: all-zero memory is a consistent, unwritten group.
uint64_t FieldValue(uint64_t version, int field) {
  return version * (0x9E3779B97F4A7C15ull + static_cast<uint64_t>(field));
}

// What a version's EndWrite publishes besides the fields: a plain (non-atomic) word per
// version, written once before the EndWrite and never again.
uint64_t PayloadValue(uint64_t version) { return ~version * 0xBF58476D1CE4E5B9ull; }

// Plain atomics only: as it would sit in a shared segment.
struct Group {
  Seqlock lock;
  std::atomic<uint64_t> written{0};  // versions written so far (the writer's counter)
  std::atomic<uint64_t> field[kFields];
  std::atomic<uint32_t> done{0};
  std::atomic<uint64_t> stop{0};
  std::atomic<uint64_t> spin{0};  // for Pause
};

// The writer between two writes: as long as a write lasts, so that readers often begin a copy
// while the version is even and a write starts during it (a writer always inside its write
// would leave them odd versions to skip, and few tears to refuse).
void Pause(std::atomic<uint64_t>& spin) {
  for (int i = 0; i < 2 * kFields; ++i) spin.fetch_add(1, std::memory_order_relaxed);
}

// `payload`, when given, gets its word for `v` after the fields and before the EndWrite: only
// EndWrite's release publishes it, and only the reader's acquire of that version sees it.
void WriteVersion(Group& g, uint64_t v, uint64_t* payload = nullptr) {
  g.lock.BeginWrite();
  for (int i = 0; i < kFields; ++i) Seqlock::Store(g.field[i], FieldValue(v, i));
  Seqlock::Store(g.written, v);
  if (payload != nullptr) payload[v] = PayloadValue(v);
  g.lock.EndWrite();
}

// A copy of the group and whether its fields all come from one version.
struct Copy {
  uint64_t written = 0;
  uint64_t field[kFields] = {};
  bool Consistent() const {
    for (int i = 0; i < kFields; ++i) {
      if (field[i] != FieldValue(written, i)) return false;
    }
    return true;
  }
};

void CopyFields(const Group& g, Copy* c) {
  c->written = Seqlock::Load(g.written);
  for (int i = 0; i < kFields; ++i) c->field[i] = Seqlock::Load(g.field[i]);
}

// How many torn copies each reader must have met (and Read refused) before the writer stops:
// the proof that reads and writes overlapped, so a reader missing its version check would
// have accepted one. The limit only ends a run that never overlaps (it fails).
constexpr uint64_t kTearsToSee = 50;
constexpr auto kLimit = std::chrono::seconds(60);

struct ReaderTally {
  uint64_t copies = 0;       // copies Read made (refused ones included)
  uint64_t torn_seen = 0;    // of which torn (Read must have refused them)
  uint64_t accepted = 0;
  uint64_t torn_accepted = 0;
  uint64_t went_back = 0;    // an accepted version older than one accepted before
  uint64_t bad_payload = 0;  // an accepted version whose published word was not visible
  uint64_t newest = 0;
};

// One reader's loop: reads until the writer is done, then once more.
template <typename Payload>
void ReadUntilDone(const Group& g, ReaderTally& t, std::atomic<uint64_t>& torn_seen,
                   Payload payload_ok) {
  bool last = false;
  while (!last) {
    last = g.done.load(std::memory_order_acquire) != 0;
    Copy c;
    bool ok = g.lock.Read(8, [&] {
      CopyFields(g, &c);
      ++t.copies;
      if (!c.Consistent()) {
        ++t.torn_seen;
        torn_seen.fetch_add(1, std::memory_order_relaxed);
      }
    });
    if (!ok) continue;
    ++t.accepted;
    if (!c.Consistent()) {
      ++t.torn_accepted;
      continue;
    }
    if (c.written < t.newest) ++t.went_back;
    t.newest = c.written;
    if (c.written != 0 && !payload_ok(c.written)) ++t.bad_payload;
  }
}

void ExpectClean(const ReaderTally& t, uint64_t last_version) {
  EXPECT_GE(t.torn_seen, kTearsToSee) << "reads and writes hardly overlapped (" << t.copies
                                      << " copies): the run proves little";
  EXPECT_GT(t.accepted, 0u);
  EXPECT_EQ(t.torn_accepted, 0u) << "of " << t.torn_seen << " torn copies";
  EXPECT_EQ(t.went_back, 0u);
  EXPECT_EQ(t.bad_payload, 0u);
  EXPECT_EQ(t.newest, last_version);  // the read after the end saw the last version
}

// One round: a fresh group and payload, readers reading until the writer stops (after
// kMaxWrites, or once every reader's tears across rounds reach kTearsToSee), then once more.
// Returns the last version written; adds each reader's tears to `tears`.
uint64_t RunRound(std::vector<ReaderTally>& tally, std::vector<uint64_t>& tears) {
  constexpr uint64_t kMaxWrites = 2000000;
  const size_t readers_n = tally.size();
  auto g = std::make_unique<Group>();
  // Plain memory, one word per version, published by the seqlock alone.
  std::vector<uint64_t> payload(kMaxWrites + 1, 0);
  std::vector<std::atomic<uint64_t>> torn_seen(readers_n);  // this round's, for the writer
  for (auto& t : tally) t = ReaderTally{};
  std::vector<std::thread> readers;
  for (size_t r = 0; r < readers_n; ++r) {
    readers.emplace_back([&, r] {
      // A plain read: without the seqlock's happens-before it races the writer's store, which
      // ThreadSanitizer reports (and the value may be stale).
      ReadUntilDone(*g, tally[r], torn_seen[r],
                    [&](uint64_t v) { return payload[v] == PayloadValue(v); });
    });
  }
  uint64_t last = 0;
  std::thread writer([&] {
    for (uint64_t v = 1; v <= kMaxWrites; ++v) {
      WriteVersion(*g, v, payload.data());
      last = v;
      Pause(g->spin);
      if (v % 1024 != 0) continue;
      bool enough = true;
      for (size_t r = 0; r < readers_n; ++r) {
        enough = enough && tears[r] + torn_seen[r].load(std::memory_order_relaxed) >= kTearsToSee;
      }
      if (enough) break;
    }
    g->done.store(1, std::memory_order_release);
  });
  writer.join();
  for (auto& t : readers) t.join();
  for (size_t r = 0; r < readers_n; ++r) tears[r] += tally[r].torn_seen;

  // Quiet now: one attempt is enough, and it reports the version of the copy.
  Copy c;
  uint32_t version = 0;
  EXPECT_TRUE(g->lock.Read(1, [&] { CopyFields(*g, &c); }, &version));
  EXPECT_TRUE(c.Consistent());
  EXPECT_EQ(c.written, last);
  EXPECT_EQ(version, 2 * last);
  EXPECT_EQ(g->lock.version(), 2 * last);
  return last;
}

// Rounds go on until every reader met kTearsToSee torn copies in all: on a loaded machine
// (the other core busy with another test) threads take turns on one core and a copy tears
// only when the reader is preempted inside it, so one bounded round may not be enough.
TEST(SeqlockTest, ReadersNeverAcceptATornCopyAndSeeWhatWasPublished) {
  constexpr int kReaders = 2;
  std::vector<ReaderTally> tally(kReaders);
  std::vector<uint64_t> tears(kReaders, 0);
  const auto end = std::chrono::steady_clock::now() + kLimit;
  int rounds = 0;
  for (;;) {
    SCOPED_TRACE(rounds);
    const uint64_t last = RunRound(tally, tears);
    ++rounds;
    for (int r = 0; r < kReaders; ++r) {
      SCOPED_TRACE(r);
      EXPECT_GT(tally[r].accepted, 0u);
      EXPECT_EQ(tally[r].torn_accepted, 0u) << "of " << tally[r].torn_seen << " torn copies";
      EXPECT_EQ(tally[r].went_back, 0u);
      EXPECT_EQ(tally[r].bad_payload, 0u);
      EXPECT_EQ(tally[r].newest, last);  // the read after the end saw the last version
    }
    if (::testing::Test::HasFailure()) return;
    bool enough = true;
    for (uint64_t n : tears) enough = enough && n >= kTearsToSee;
    if (enough || std::chrono::steady_clock::now() > end) break;
  }
  for (int r = 0; r < kReaders; ++r) {
    EXPECT_GE(tears[r], kTearsToSee) << "reader " << r << ": reads and writes hardly overlapped in "
                                     << rounds << " rounds: the run proves little";
  }
}

TEST(SeqlockTest, AnOddVersionIsNeverAcceptedAndReadGivesUp) {
  Group g;
  WriteVersion(g, 7);
  g.lock.BeginWrite();  // a writer stopped mid-write (preempted, or its process died)
  Seqlock::Store(g.field[0], FieldValue(8, 0));
  EXPECT_EQ(g.lock.ReadBegin() & 1, 1u);
  EXPECT_FALSE(g.lock.ReadValidate(g.lock.ReadBegin()));
  int copies = 0;
  Copy c;
  EXPECT_FALSE(g.lock.Read(5, [&] {
    ++copies;
    CopyFields(g, &c);
  }));
  EXPECT_EQ(copies, 0);  // an odd version is not even copied
  g.lock.EndWrite();
  EXPECT_TRUE(g.lock.Read(1, [&] { CopyFields(g, &c); }));
  EXPECT_EQ(c.field[0], FieldValue(8, 0));
}

TEST(SeqlockTest, AWriteDuringTheCopyIsRefused) {
  Group g;
  WriteVersion(g, 1);
  uint32_t begin = g.lock.ReadBegin();
  Copy c;
  CopyFields(g, &c);
  WriteVersion(g, 2);  // lands between the copy and the check
  EXPECT_FALSE(g.lock.ReadValidate(begin));
  int copies = 0;
  EXPECT_TRUE(g.lock.Read(3, [&] {
    if (++copies == 1) WriteVersion(g, 3);  // the first copy meets a write, the second not
    CopyFields(g, &c);
  }));
  EXPECT_EQ(copies, 2);
  EXPECT_EQ(c.written, 3u);
}

// Two processes, one mapping: the writer a child process, the reader this one. All-zero
// memory is an unwritten Seqlock (a fresh shm segment), so nothing is constructed in it.
TEST(SeqlockTest, AcrossProcessesSharingTheMemory) {
  void* mem = mmap(nullptr, sizeof(Group), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  std::memset(mem, 0, sizeof(Group));
  Group& g = *std::launder(reinterpret_cast<Group*>(mem));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // No bound on writes: the stopper ends the run (on tears, or at kLimit), however slowly
    // a loaded machine lets the two processes overlap.
    uint64_t v = 1;
    while (g.stop.load(std::memory_order_relaxed) == 0) {
      WriteVersion(g, v++);
      Pause(g.spin);
    }
    WriteVersion(g, v);  // the last version, whenever it stops
    g.done.store(1, std::memory_order_release);
    _exit(0);
  }
  ReaderTally t;
  std::atomic<uint64_t> torn_seen{0};
  std::thread stopper([&] {  // stops the writer once the reader met enough tears
    const auto end = std::chrono::steady_clock::now() + kLimit;
    while (torn_seen.load(std::memory_order_relaxed) < kTearsToSee &&
           g.done.load(std::memory_order_relaxed) == 0 && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    g.stop.store(1, std::memory_order_relaxed);
  });
  ReadUntilDone(g, t, torn_seen, [](uint64_t) { return true; });
  stopper.join();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ExpectClean(t, g.written.load(std::memory_order_relaxed));
  munmap(mem, sizeof(Group));
}

}  // namespace
}  // namespace ft

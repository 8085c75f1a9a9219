#include "jitckpt/arena.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <vector>

#include "common/job_name.h"
#include "jitckpt/tests/refuse_reservation.h"
#include "jitckpt/tests/sample_manifest.h"
#include "jitckpt/tests/temp_dir.h"

namespace ft::ckpt {
namespace {

using testing::RefuseReservations;
using testing::SampleManifest;
using testing::TempDir;

constexpr uint64_t kManifestCapacity = 64 << 10;

class ArenaTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }

  // Opens rank 3's arena for writing with room for `data_bytes`, in `slots` slots.
  Arena OpenWriter(uint64_t data_bytes = 1 << 20, uint64_t manifest_capacity = kManifestCapacity, int slots = 2) {
    Arena arena;
    Status s = Arena::OpenForWrite(dir_.path(), "job-a", 3, manifest_capacity, data_bytes, slots, &arena);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return arena;
  }

  // Saves a sample copy into `arena` as the agent does: BeginWrite, data, Commit.
  Manifest SaveSample(Arena* arena, uint64_t seed = 1) {
    std::vector<uint8_t> data;
    Manifest m = SampleManifest(&data, {5000, 4096, 123}, 4096, seed);
    std::memcpy(arena->BeginWrite(), data.data(), data.size());
    Status s = arena->Commit(m);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return m;
  }

  // The committed copy's manifest and data as a reader in another process sees them.
  static Manifest Committed(const Arena& arena, const uint8_t** data = nullptr, uint64_t* generation = nullptr) {
    Manifest m;
    uint64_t g = 0;
    Status s = arena.ReadCommitted(&m, &g);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (data != nullptr) *data = arena.data(g);
    if (generation != nullptr) *generation = g;
    return m;
  }

  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  TempDir dir_;
};

TEST_F(ArenaTest, FileIsPrivateFullyReservedAndItsDataRegionHugePageAligned) {
  Arena arena = OpenWriter(3 << 20);
  ASSERT_TRUE(arena.is_open());
  EXPECT_EQ(arena.path(), dir_.File("ft-ckpt.job-a.3"));
  struct stat st {};
  ASSERT_EQ(stat(arena.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), arena.mapped_bytes());
  // posix_fallocate reserved every block: nothing is left to allocate at save time.
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, arena.mapped_bytes());
  EXPECT_GE(arena.data_capacity(), 3u << 20);
  EXPECT_EQ(arena.data_capacity() % kArenaDataAlign, 0u);
  EXPECT_EQ(arena.slot_count(), 2);
  EXPECT_EQ(arena.slots_bytes(), 2 * arena.data_capacity());
  // The data regions start 2 MiB into the file, so the mapping's data pointers keep the file
  // offsets' alignment relative to the (page-aligned) mapping.
  EXPECT_EQ((arena.mapped_bytes() - arena.slots_bytes()) % kArenaDataAlign, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.slots_data()) % 4096, 0u);
  const uint8_t* first = arena.BeginWrite();
  EXPECT_TRUE(first == arena.slots_data() || first == arena.slots_data() + arena.data_capacity());
  EXPECT_EQ(Files(), std::vector<std::string>{"ft-ckpt.job-a.3"});  // no temp file left
}

// ArenaPrep::kByWriter (libft.so's agent): the open reserves the header and manifests only and
// keeps the file open; PrepareData reserves the data regions, maps them and lets the file go.
// The free space is checked for the whole file at open all the same.
TEST_F(ArenaTest, ADeferredArenaIsReservedByPrepareDataBeforeItsFirstSave) {
  auto open_fds = [] {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const int fds = open_fds();
  Arena arena;
  Status s = Arena::OpenForWrite(dir_.path(), "job-a", 3, kManifestCapacity, 8 << 20, 2, &arena, ArenaPrep::kByWriter);
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct stat st {};
  ASSERT_EQ(stat(arena.path().c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), arena.mapped_bytes());
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, arena.slots_bytes()) << "the data regions were reserved at open";
  EXPECT_EQ(open_fds(), fds + 1);  // kept for PrepareData
  ASSERT_TRUE(arena.PrepareData(2).ok());
  ASSERT_EQ(stat(arena.path().c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, arena.mapped_bytes());
  EXPECT_EQ(open_fds(), fds);
  EXPECT_TRUE(arena.PrepareData(2).ok());  // once is enough
  Manifest m = SaveSample(&arena);
  EXPECT_EQ(Committed(arena).step, m.step);

  // Reopened deferred, the committed copy stays through PrepareData; a stop asked for before it
  // still reserves every block (only the populating is cut short).
  arena = Arena();
  Arena again;
  ASSERT_TRUE(Arena::OpenForWrite(dir_.path(), "job-a", 3, kManifestCapacity, 8 << 20, 2, &again, ArenaPrep::kByWriter).ok());
  std::atomic<bool> stop{true};
  ASSERT_TRUE(again.PrepareData(1, &stop).ok());
  ASSERT_EQ(stat(again.path().c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, again.mapped_bytes());
  const uint8_t* data = nullptr;
  Manifest kept = Committed(again, &data);
  EXPECT_EQ(kept.step, m.step);
  for (size_t i = 0; i < kept.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(kept, i, data)) << i;
}

// A fresh arena prepared one slot at a time (libft.so's agent, so that a restore into it need not
// wait for the other slot): slot 0 first, which its first write uses, then the rest.
TEST_F(ArenaTest, ADeferredArenaCanBePreparedOneSlotAtATime) {
  Arena arena;
  ASSERT_TRUE(Arena::OpenForWrite(dir_.path(), "job-a", 4, kManifestCapacity, 8 << 20, 2, &arena, ArenaPrep::kByWriter).ok());
  EXPECT_TRUE(arena.created());
  EXPECT_FALSE(arena.slot_prepared(0));
  EXPECT_FALSE(arena.slot_prepared(1));
  const uint64_t data_offset = arena.mapped_bytes() - arena.slots_bytes();
  auto reserved = [&] {
    struct stat st {};
    EXPECT_EQ(stat(arena.path().c_str(), &st), 0);
    return static_cast<uint64_t>(st.st_blocks) * 512;
  };
  ASSERT_TRUE(arena.PrepareSlot(0, 2).ok());
  EXPECT_TRUE(arena.slot_prepared(0));
  EXPECT_FALSE(arena.slot_prepared(1));
  EXPECT_GE(reserved(), data_offset + arena.data_capacity());
  EXPECT_LT(reserved(), arena.mapped_bytes()) << "slot 1 was reserved with slot 0";
  Manifest m = SaveSample(&arena);  // the first write: slot 0
  EXPECT_EQ(Committed(arena).step, m.step);
  EXPECT_EQ(arena.committed_slot(), 0);
  EXPECT_LT(reserved(), arena.mapped_bytes());
  ASSERT_TRUE(arena.PrepareData(2).ok());  // the rest
  EXPECT_TRUE(arena.slot_prepared(1));
  EXPECT_GE(reserved(), arena.mapped_bytes());
  EXPECT_TRUE(arena.PrepareSlot(1, 2).ok());  // nothing left to do
  EXPECT_EQ(arena.ReserveSlot(2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Committed(arena).step, m.step);

  arena = Arena();
  Arena again;  // reopened: it holds a copy, this open did not create it
  ASSERT_TRUE(Arena::OpenForWrite(dir_.path(), "job-a", 4, kManifestCapacity, 8 << 20, 2, &again, ArenaPrep::kByWriter).ok());
  EXPECT_FALSE(again.created());
}

// A rank relaunched in place reads its committed copy: libft.so prepares that copy's slot
// first, whichever it is, with the other slot only reserved until after the restore.
TEST_F(ArenaTest, AReopenedArenaPreparesTheCommittedSlotAlone) {
  Manifest second;
  {
    Arena writer;
    ASSERT_TRUE(Arena::OpenForWrite(dir_.path(), "job-a", 4, kManifestCapacity, 8 << 20, 2, &writer).ok());
    SaveSample(&writer, 1);
    second = SaveSample(&writer, 2);
    EXPECT_EQ(writer.committed_slot(), 1);
  }
  Arena again;
  ASSERT_TRUE(Arena::OpenForWrite(dir_.path(), "job-a", 4, kManifestCapacity, 8 << 20, 2, &again, ArenaPrep::kByWriter).ok());
  EXPECT_EQ(again.committed_slot(), 1);
  ASSERT_TRUE(again.PrepareSlot(1, 2).ok());
  EXPECT_TRUE(again.slot_prepared(1));
  EXPECT_FALSE(again.slot_prepared(0));
  const uint8_t* data = nullptr;
  Manifest kept = Committed(again, &data);
  EXPECT_EQ(kept.step, second.step);
  for (size_t i = 0; i < kept.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(kept, i, data)) << i;
  ASSERT_TRUE(again.ReserveSlot(0).ok());
  EXPECT_FALSE(again.slot_prepared(0)) << "reserved, not mapped";
  Manifest third = SaveSample(&again, 3);  // into slot 0, reserved
  EXPECT_EQ(Committed(again).step, third.step);
  EXPECT_EQ(again.committed_slot(), 0);
}

// A write never goes to a slot nobody reserved: BeginWrite reserves it, and where that fails (as
// on a full /dev/shm) it returns no region and the arena is closed — an error, never a SIGBUS.
// The failure is made in a child (RefuseReservations).
TEST_F(ArenaTest, BeginWriteReservesAnUnreservedSlotOrRefuses) {
  {
    Arena arena;
    ASSERT_TRUE(Arena::OpenForWrite(dir_.path(), "job-a", 5, kManifestCapacity, 8 << 20, 2, &arena, ArenaPrep::kByWriter).ok());
    const uint64_t data_offset = arena.mapped_bytes() - arena.slots_bytes();
    Manifest m = SaveSample(&arena);  // slot 0, reserved by BeginWrite
    struct stat st {};
    ASSERT_EQ(stat(arena.path().c_str(), &st), 0);
    EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, data_offset + arena.data_capacity());
    EXPECT_FALSE(arena.slot_prepared(0)) << "reserved only";
    EXPECT_EQ(Committed(arena).step, m.step);
  }
  std::filesystem::remove(Arena::PathFor(dir_.path(), "job-a", 5));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Arena arena;
    if (!Arena::OpenForWrite(dir_.path(), "job-a", 5, kManifestCapacity, 8 << 20, 2, &arena, ArenaPrep::kByWriter).ok()) _exit(3);
    if (!RefuseReservations(arena.path())) _exit(4);
    const bool refused = arena.BeginWrite() == nullptr && !arena.is_open();
    const bool removed = !std::filesystem::exists(Arena::PathFor(dir_.path(), "job-a", 5));
    const bool again = arena.ReserveSlot(1).code() == StatusCode::kIoError;
    _exit(refused && removed && again ? 0 : (refused ? 2 : 1));
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: a region was given, 2: file left behind or the closed arena reserved, 3: open failed, 4: no descriptor to swap";
}

TEST_F(ArenaTest, ADeferredArenaTooLargeForTheDirectoryFailsAtOpen) {
  struct statvfs fs {};
  ASSERT_EQ(statvfs(dir_.path().c_str(), &fs), 0);
  Arena arena;
  Status s = Arena::OpenForWrite(dir_.path(), "job-a", 3, kManifestCapacity,
                                 static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize + (1ull << 30), 2, &arena,
                                 ArenaPrep::kByWriter);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find("needs"), std::string_view::npos) << s.ToString();
  EXPECT_FALSE(arena.is_open());
  EXPECT_TRUE(Files().empty());
}

// Pins the header layout of docs/checkpoints.md ("Host arena"): ftworker and peers built at
// another time read it.
TEST_F(ArenaTest, HeaderLayoutIsPinned) {
  Arena writer = OpenWriter(3 << 20, kManifestCapacity);
  Manifest saved = SaveSample(&writer);
  std::vector<char> header(4096);
  std::ifstream(writer.path(), std::ios::binary).read(header.data(), 4096);
  auto at = [&](size_t offset, auto value) {
    decltype(value) stored;
    std::memcpy(&stored, header.data() + offset, sizeof(stored));
    return stored == value;
  };
  EXPECT_EQ(std::string(header.data(), 8), "CKARENA1");
  EXPECT_TRUE(at(8, uint32_t{2}));
  EXPECT_TRUE(at(12, uint32_t{4096}));
  EXPECT_TRUE(at(16, uint64_t{kManifestCapacity}));
  EXPECT_TRUE(at(24, uint64_t{2} << 20));  // roundup(4096 + 2 x 64 KiB, 2 MiB)
  EXPECT_TRUE(at(32, uint64_t{4} << 20));  // 3 MiB rounded up to 2 MiB, per slot
  EXPECT_TRUE(at(40, uint64_t{10} << 20));  // 2 MiB + 2 x 4 MiB
  EXPECT_TRUE(at(48, static_cast<uint32_t>(geteuid())));
  EXPECT_TRUE(at(52, static_cast<uint32_t>(getpid())));
  EXPECT_TRUE(at(64, uint32_t{2}));    // slots
  EXPECT_TRUE(at(128, uint32_t{0}));   // the first save went to slot 0
  EXPECT_TRUE(at(192, uint64_t{2}));   // slot 0's sequence: odd while writing, even once committed
  EXPECT_TRUE(at(256, uint64_t{0}));   // slot 1: never written
  std::string manifest = EncodeManifest(saved);
  EXPECT_TRUE(at(200, uint64_t{manifest.size()}));
  auto region_at = [&](uint64_t offset, size_t bytes) {
    std::vector<char> region(bytes);
    std::ifstream in(writer.path(), std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(region.data(), static_cast<std::streamsize>(region.size()));
    return std::string(region.data(), region.size());
  };
  EXPECT_EQ(region_at(4096, manifest.size()), manifest);
  EXPECT_EQ(writer.mapped_bytes(), uint64_t{10} << 20);

  // The second save goes to slot 1 (manifest at 4096 + capacity) and the commit flips to it.
  Manifest second = SaveSample(&writer, 2);
  std::ifstream(writer.path(), std::ios::binary).read(header.data(), 4096);
  EXPECT_TRUE(at(128, uint32_t{1}));
  EXPECT_TRUE(at(192, uint64_t{2}));
  EXPECT_TRUE(at(256, uint64_t{2}));
  std::string second_manifest = EncodeManifest(second);
  EXPECT_TRUE(at(264, uint64_t{second_manifest.size()}));
  EXPECT_EQ(region_at(4096 + kManifestCapacity, second_manifest.size()), second_manifest);
  EXPECT_EQ(region_at(4096, manifest.size()), manifest) << "slot 0 keeps the older copy";
}

TEST_F(ArenaTest, LeavesNoDescriptorOpen) {
  auto open_fds = [] {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  int before = open_fds();
  Arena writer = OpenWriter();
  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(writer.path(), &reader).ok());
  EXPECT_EQ(open_fds(), before);  // the mappings outlive their descriptors
}

TEST_F(ArenaTest, CommittedCopyReadsBackInAnotherMapping) {
  Arena writer = OpenWriter();
  Manifest saved = SaveSample(&writer);
  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(writer.path(), &reader).ok());
  Manifest read;
  uint64_t generation = 0;
  ASSERT_TRUE(reader.ReadCommitted(&read, &generation).ok());
  EXPECT_EQ(read, saved);
  EXPECT_GT(generation, 0u);
  for (size_t i = 0; i < read.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(read, i, reader.data(generation))) << i;
  EXPECT_TRUE(reader.StillCommitted(generation));
}

TEST_F(ArenaTest, EmptyArenaHasNothingCommitted) {
  Arena writer = OpenWriter();
  Manifest m;
  uint64_t generation = 0;
  EXPECT_EQ(writer.ReadCommitted(&m, &generation).code(), StatusCode::kNotFound);
}

TEST_F(ArenaTest, ReopenWithTheSameGeometryKeepsTheCommittedCopy) {
  Manifest saved;
  {
    Arena writer = OpenWriter();
    saved = SaveSample(&writer, 9);
  }  // the process "exits": the file stays
  Arena again = OpenWriter();
  const uint8_t* data = nullptr;
  Manifest read = Committed(again, &data);
  EXPECT_EQ(read, saved);
  for (size_t i = 0; i < read.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(read, i, data)) << i;
}

TEST_F(ArenaTest, ReopenWithAnotherGeometryResetsToEmpty) {
  {
    Arena writer = OpenWriter(1 << 20);
    SaveSample(&writer);
  }
  struct Geometry {
    uint64_t data_bytes, manifest_capacity;
    int slots;
  };
  for (Geometry g : {Geometry{5 << 20, kManifestCapacity, 2}, Geometry{1 << 20, kManifestCapacity * 2, 2},
                     Geometry{1 << 20, kManifestCapacity * 2, 1}}) {
    const uint64_t data_bytes = g.data_bytes;
    Arena again = OpenWriter(data_bytes, g.manifest_capacity, g.slots);
    Manifest m;
    uint64_t generation = 0;
    EXPECT_EQ(again.ReadCommitted(&m, &generation).code(), StatusCode::kNotFound);
    EXPECT_GE(again.data_capacity(), data_bytes);
    SaveSample(&again);
  }
  EXPECT_EQ(Files(), std::vector<std::string>{"ft-ckpt.job-a.3"});
}

// A writer that dies inside a save (SIGKILL): with two slots the copy committed before it is
// still there, whole; with one, the save was overwriting it and the arena holds none.
TEST_F(ArenaTest, ReopenAfterAWriterDiedInsideASaveKeepsTheCommittedCopyWithTwoSlots) {
  for (int slots : {2, 1}) {
    std::filesystem::remove(dir_.File("ft-ckpt.job-a.3"));
    Manifest saved;
    {
      Arena writer = OpenWriter(1 << 20, kManifestCapacity, slots);
      SaveSample(&writer, 1);
      saved = SaveSample(&writer, 2);
      std::memset(writer.BeginWrite(), 0xee, 100);  // dies here, part of a third copy written
    }
    Arena again = OpenWriter(1 << 20, kManifestCapacity, slots);
    Manifest m;
    uint64_t generation = 0;
    Status s = again.ReadCommitted(&m, &generation);
    if (slots == 2) {
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(m, saved);
      for (size_t i = 0; i < m.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(m, i, again.data(generation))) << i;
    } else {
      EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
    }
    Manifest next = SaveSample(&again, 3);
    EXPECT_EQ(Committed(again), next) << slots << " slot(s)";
  }
}

// The same with a real SIGKILL of the writing process in the middle of its copy.
TEST_F(ArenaTest, ASigkillMidSaveLeavesThePreviousCopyCommittedAndWhole) {
  Manifest saved;
  {
    Arena writer = OpenWriter(4 << 20);
    saved = SaveSample(&writer, 7);
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Arena writer;
    if (!Arena::OpenForWrite(dir_.path(), "job-a", 3, kManifestCapacity, 4 << 20, 2, &writer).ok()) _exit(3);
    uint8_t* data = writer.BeginWrite();
    std::memset(data, 0x5a, 1 << 20);
    if (write(ready[1], "x", 1) != 1) _exit(4);
    for (uint64_t i = 0;; ++i) data[(1 << 20) + i % (3 << 20)] = static_cast<uint8_t>(i);  // copying...
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  Arena reader;  // ftworker's view before anyone reopens the arena
  ASSERT_TRUE(Arena::OpenForRead(dir_.File("ft-ckpt.job-a.3"), &reader).ok());
  const uint8_t* data = nullptr;
  Manifest m = Committed(reader, &data);
  EXPECT_EQ(m, saved);
  for (size_t i = 0; i < m.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(m, i, data)) << i;
  Arena again = OpenWriter(4 << 20);  // the restarted rank
  EXPECT_EQ(Committed(again), saved);
}

// A save that fails (a CUDA error, given up) is abandoned: two slots keep the committed copy,
// one slot holds none.
TEST_F(ArenaTest, AnAbandonedSaveKeepsTheCommittedCopyWithTwoSlots) {
  for (int slots : {2, 1}) {
    std::filesystem::remove(dir_.File("ft-ckpt.job-a.3"));
    Arena writer = OpenWriter(1 << 20, kManifestCapacity, slots);
    Manifest saved = SaveSample(&writer, 4);
    Arena reader;
    ASSERT_TRUE(Arena::OpenForRead(writer.path(), &reader).ok());
    uint64_t generation = 0;
    Committed(reader, nullptr, &generation);
    std::memset(writer.BeginWrite(), 0xee, 4096);
    writer.AbandonWrite();
    EXPECT_EQ(writer.write_data(), nullptr);
    Manifest m;
    uint64_t after = 0;
    Status s = reader.ReadCommitted(&m, &after);
    if (slots == 2) {
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(m, saved);
      EXPECT_EQ(after, generation);
      EXPECT_TRUE(reader.StillCommitted(generation));
    } else {
      EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
      EXPECT_FALSE(reader.StillCommitted(generation));
    }
  }
}

// Two slots: a reader's copy stays valid through the next save and its commit, and is gone
// only when the save after that begins writing its slot.
TEST_F(ArenaTest, WithTwoSlotsACopyOutlivesTheNextSave) {
  Arena writer = OpenWriter();
  Manifest first = SaveSample(&writer, 1);
  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(writer.path(), &reader).ok());
  uint64_t generation = 0;
  const uint8_t* data = nullptr;
  EXPECT_EQ(Committed(reader, &data, &generation), first);

  writer.BeginWrite();
  EXPECT_TRUE(reader.StillCommitted(generation));
  EXPECT_EQ(Committed(reader), first) << "the committed copy is readable during a save";
  Manifest second = SaveSample(&writer, 2);
  EXPECT_TRUE(reader.StillCommitted(generation));
  for (size_t i = 0; i < first.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(first, i, data)) << i;
  uint64_t next = 0;
  EXPECT_EQ(Committed(reader, nullptr, &next), second);
  EXPECT_NE(next, generation);

  writer.BeginWrite();  // the third save takes the first one's slot
  EXPECT_FALSE(reader.StillCommitted(generation));
  EXPECT_TRUE(reader.StillCommitted(next));
}

// A torn save (the optimizer may have been writing) never takes the committed place of a whole
// copy: the whole step stays committed, the torn one sits in the other slot (ReadSlot), and the
// next save overwrites the torn one, not the whole one. A torn copy is committed only where no
// whole copy is (first save; one slot).
TEST_F(ArenaTest, ATornCopyNeverReplacesAWholeOne) {
  Arena writer = OpenWriter();
  Manifest whole = SaveSample(&writer, 1);
  std::vector<uint8_t> data;
  Manifest torn = SampleManifest(&data, {5000, 4096, 123}, 4096, 2);
  torn.step = whole.step + 1;
  torn.torn = true;
  std::memcpy(writer.BeginWrite(), data.data(), data.size());
  ASSERT_TRUE(writer.Commit(torn).ok());
  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(writer.path(), &reader).ok());
  uint64_t generation = 0;
  EXPECT_EQ(Committed(reader, nullptr, &generation), whole) << "the whole copy stays the committed one";
  Manifest in_slot;
  uint64_t slot_generation = 0;
  const int torn_slot = 1 - static_cast<int>(generation & 1);
  ASSERT_TRUE(reader.ReadSlot(torn_slot, &in_slot, &slot_generation).ok());
  EXPECT_EQ(in_slot, torn);
  EXPECT_TRUE(reader.StillCommitted(slot_generation));

  // Torn again: still into the torn copy's slot.
  torn.step += 1;
  std::memcpy(writer.BeginWrite(), data.data(), data.size());
  ASSERT_TRUE(writer.Commit(torn).ok());
  EXPECT_EQ(Committed(reader), whole);
  EXPECT_TRUE(reader.StillCommitted(generation)) << "the whole copy's slot was not written";

  // The next whole save takes the torn slot and is committed.
  Manifest next = SaveSample(&writer, 3);
  EXPECT_EQ(Committed(reader), next);
  EXPECT_TRUE(reader.StillCommitted(generation)) << "the previous whole copy survives one more save";

  // A given-up write leaves its slot with no copy (not the old manifest over half-new data).
  writer.BeginWrite();
  writer.AbandonWrite();
  EXPECT_EQ(reader.ReadSlot(static_cast<int>(generation & 1), &in_slot, &slot_generation).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(reader.ReadSlot(2, &in_slot, &slot_generation).code(), StatusCode::kInvalidArgument);
}

// The step before the newest stays readable by its step (a plan that restores it after some
// ranks saved one more) until the next save; a restore that used it makes it the committed copy.
TEST_F(ArenaTest, ReadStepFindsEitherSlotsWholeCopyAndMakeCommittedRewindsToIt) {
  Arena writer = OpenWriter();
  std::vector<uint8_t> data;
  Manifest older = SampleManifest(&data, {5000, 4096, 123}, 4096, 1);
  older.step = 10;
  std::memcpy(writer.BeginWrite(), data.data(), data.size());
  ASSERT_TRUE(writer.Commit(older).ok());
  Manifest newer = SampleManifest(&data, {5000, 4096, 123}, 4096, 2);
  newer.step = 11;
  std::memcpy(writer.BeginWrite(), data.data(), data.size());
  ASSERT_TRUE(writer.Commit(newer).ok());
  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(writer.path(), &reader).ok());
  Manifest m;
  uint64_t g10 = 0, g11 = 0;
  ASSERT_TRUE(reader.ReadStep(11, &m, &g11).ok());
  EXPECT_EQ(m, newer);
  ASSERT_TRUE(reader.ReadStep(10, &m, &g10).ok()) << "the other slot's copy";
  EXPECT_EQ(m, older);
  for (size_t i = 0; i < older.chunk_count(); ++i) EXPECT_TRUE(ChunkVerifies(older, i, reader.data(g10))) << i;
  EXPECT_EQ(reader.ReadStep(9, &m, &g10).code(), StatusCode::kNotFound);
  EXPECT_EQ(reader.MakeCommitted(g10).code(), StatusCode::kInvalidArgument) << "a reader cannot";

  ASSERT_TRUE(writer.ReadStep(10, &m, &g10).ok());
  ASSERT_TRUE(writer.MakeCommitted(g10).ok());
  EXPECT_EQ(Committed(reader), older) << "rewound to the restored step";
  EXPECT_TRUE(reader.ReadStep(11, &m, &g11).ok()) << "the newer copy stays until the next save";
  Manifest next = SaveSample(&writer, 3);
  EXPECT_EQ(Committed(reader), next);
  EXPECT_EQ(reader.ReadStep(11, &m, &g11).code(), StatusCode::kNotFound) << "the next save took the other slot";
  EXPECT_TRUE(reader.ReadStep(10, &m, &g10).ok()) << "the restored step's copy stays";

  // A torn copy is never found by its step; a slot written since the read cannot be committed.
  Manifest torn = SampleManifest(&data, {5000, 4096, 123}, 4096, 4);
  torn.step = 12;
  torn.torn = true;
  std::memcpy(writer.BeginWrite(), data.data(), data.size());
  ASSERT_TRUE(writer.Commit(torn).ok());
  EXPECT_EQ(reader.ReadStep(12, &m, &g11).code(), StatusCode::kNotFound);
  ASSERT_TRUE(writer.ReadStep(next.step, &m, &g11).ok());
  SaveSample(&writer, 5);
  SaveSample(&writer, 6);
  EXPECT_EQ(writer.MakeCommitted(g11).code(), StatusCode::kNotReady);
}

TEST_F(ArenaTest, RecommitOlderSlotLetsTheNextSaveReplaceTheNewerCopy) {
  Arena writer = OpenWriter();
  std::vector<uint8_t> data;
  auto save = [&](int64_t step, uint64_t seed, bool torn) {
    Manifest m = SampleManifest(&data, {5000, 4096, 123}, 4096, seed);
    m.step = step;
    m.torn = torn;
    std::memcpy(writer.BeginWrite(), data.data(), data.size());
    EXPECT_TRUE(writer.Commit(m).ok());
    return m;
  };
  EXPECT_EQ(writer.RecommitOlderSlot().code(), StatusCode::kNotFound) << "nothing committed";
  const Manifest periodic = save(6, 1, false);
  EXPECT_EQ(writer.RecommitOlderSlot().code(), StatusCode::kNotFound) << "the other slot is empty";
  const Manifest first = save(8, 2, false);  // a termination's first copy
  ASSERT_TRUE(writer.RecommitOlderSlot().ok());
  EXPECT_EQ(Committed(writer), periodic);
  EXPECT_EQ(writer.RecommitOlderSlot().code(), StatusCode::kNotFound) << "the other copy is newer now";
  const Manifest more = save(9, 3, false);  // the one step more
  Manifest m;
  uint64_t g = 0;
  EXPECT_EQ(Committed(writer), more);
  EXPECT_TRUE(writer.ReadStep(6, &m, &g).ok()) << "the older copy stays";
  EXPECT_EQ(writer.ReadStep(8, &m, &g).code(), StatusCode::kNotFound) << "the first copy was replaced";

  // A torn copy in the other slot is never made the committed one.
  save(10, 4, true);
  EXPECT_EQ(Committed(writer), more);
  EXPECT_EQ(writer.RecommitOlderSlot().code(), StatusCode::kNotFound);
  EXPECT_EQ(Committed(writer), more);
}

TEST_F(ArenaTest, ATornCopyIsCommittedWhereNoWholeOneIs) {
  for (int slots : {2, 1}) {
    std::filesystem::remove(dir_.File("ft-ckpt.job-a.3"));
    Arena writer = OpenWriter(1 << 20, kManifestCapacity, slots);
    std::vector<uint8_t> data;
    Manifest torn = SampleManifest(&data, {5000, 4096, 123}, 4096, 2);
    torn.torn = true;
    std::memcpy(writer.BeginWrite(), data.data(), data.size());
    ASSERT_TRUE(writer.Commit(torn).ok());
    EXPECT_EQ(Committed(writer), torn) << slots << " slot(s): the first copy, torn, is what there is";
    torn.step += 1;
    std::memcpy(writer.BeginWrite(), data.data(), data.size());
    ASSERT_TRUE(writer.Commit(torn).ok());
    EXPECT_EQ(Committed(writer), torn) << "a torn copy replaces a torn one";
    if (slots == 1) {
      Manifest whole = SaveSample(&writer, 5);
      torn.step = whole.step + 1;
      std::memcpy(writer.BeginWrite(), data.data(), data.size());
      ASSERT_TRUE(writer.Commit(torn).ok());
      EXPECT_EQ(Committed(writer), torn) << "one slot: the save overwrote the whole copy in place";
    }
  }
}

TEST_F(ArenaTest, WithOneSlotAReaderSeesABeginWriteAndTheNextCommit) {
  Arena writer = OpenWriter(1 << 20, kManifestCapacity, 1);
  SaveSample(&writer, 1);
  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(writer.path(), &reader).ok());
  Manifest m;
  uint64_t generation = 0;
  ASSERT_TRUE(reader.ReadCommitted(&m, &generation).ok());
  EXPECT_TRUE(reader.StillCommitted(generation));

  writer.BeginWrite();
  EXPECT_FALSE(reader.StillCommitted(generation));
  Manifest during;
  uint64_t during_generation = 0;
  EXPECT_EQ(reader.ReadCommitted(&during, &during_generation).code(), StatusCode::kNotFound);

  Manifest second = SaveSample(&writer, 2);
  uint64_t next = 0;
  ASSERT_TRUE(reader.ReadCommitted(&m, &next).ok());
  EXPECT_EQ(m, second);
  EXPECT_NE(next, generation);
  EXPECT_FALSE(reader.StillCommitted(generation));
  EXPECT_TRUE(reader.StillCommitted(next));
}

TEST_F(ArenaTest, CommitRefusesWhatDoesNotFit) {
  Arena writer = OpenWriter(1 << 20, 4096);
  std::vector<uint8_t> data;
  Manifest big_data = SampleManifest(&data, {(3u << 20)});
  EXPECT_EQ(writer.Commit(big_data).code(), StatusCode::kInvalidArgument);
  Manifest long_manifest = SampleManifest(&data, {1 << 20}, 64);  // 16384 chunk checksums
  Status s = writer.Commit(long_manifest);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("reserves 4096"), std::string_view::npos) << s.ToString();

  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(writer.path(), &reader).ok());
  Manifest small = SampleManifest(&data);
  EXPECT_EQ(reader.Commit(small).code(), StatusCode::kInvalidArgument);  // read-only
}

TEST_F(ArenaTest, TooLargeForTheDirectoryFailsFastNamingDirNeededAndFree) {
  struct statvfs fs {};
  ASSERT_EQ(statvfs(dir_.path().c_str(), &fs), 0);
  uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  uint64_t too_much = free_bytes + (1ull << 30);
  auto start = std::chrono::steady_clock::now();
  Arena arena;
  Status s = Arena::OpenForWrite(dir_.path(), "job-a", 3, kManifestCapacity, too_much, 2, &arena);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find(dir_.path()), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("needs"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("free"), std::string_view::npos) << s.ToString();
  EXPECT_FALSE(arena.is_open());
  EXPECT_TRUE(Files().empty());  // the file is removed
  EXPECT_LT(seconds, 5.0);       // nothing was allocated first (25 GB would take far longer)
}

TEST_F(ArenaTest, TooLargeForTheDirectoryRemovesAnOutdatedArenaToo) {
  { Arena writer = OpenWriter(); }
  struct statvfs fs {};
  ASSERT_EQ(statvfs(dir_.path().c_str(), &fs), 0);
  Arena arena;
  Status s = Arena::OpenForWrite(dir_.path(), "job-a", 3, kManifestCapacity,
                                 static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize * 2, 2, &arena);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_TRUE(Files().empty());
}

// A failed posix_fallocate (here EFBIG from a file size limit, as ENOSPC would be on a full
// disk) is a clear error and leaves no file behind. In a child: the limit is per process.
TEST_F(ArenaTest, AFailedReservationIsAClearErrorAndRemovesTheFile) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {1 << 20, 1 << 20};
    setrlimit(RLIMIT_FSIZE, &limit);
    Arena arena;
    Status s = Arena::OpenForWrite(dir_.path(), "job-a", 3, kManifestCapacity, 8 << 20, 2, &arena);
    bool named = s.code() == StatusCode::kIoError && s.message().find("File too large") != std::string_view::npos &&
                 s.message().find(dir_.path()) != std::string_view::npos;
    bool removed = std::filesystem::is_empty(dir_.path());
    _exit(named && removed ? 0 : (named ? 2 : 1));
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: error not named, 2: file left behind";
}

TEST_F(ArenaTest, OpenForReadOfAMissingArenaIsNotFound) {
  Arena reader;
  EXPECT_EQ(Arena::OpenForRead(dir_.File("ft-ckpt.job-a.9"), &reader).code(), StatusCode::kNotFound);
}

TEST_F(ArenaTest, OpenForReadTrustsNothing) {
  std::string valid_path;
  {
    Arena writer = OpenWriter();
    SaveSample(&writer);
    valid_path = writer.path();
  }
  std::vector<char> image(std::filesystem::file_size(valid_path));
  {
    std::ifstream in(valid_path, std::ios::binary);
    in.read(image.data(), static_cast<std::streamsize>(image.size()));
  }
  auto write_file = [&](const std::string& name, const std::vector<char>& bytes) {
    std::string path = dir_.File(name);
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    chmod(path.c_str(), 0600);
    return path;
  };
  auto patched = [&](size_t offset, auto value) {
    std::vector<char> bytes = image;
    std::memcpy(bytes.data() + offset, &value, sizeof(value));
    return bytes;
  };
  std::mt19937_64 rng(3);
  std::vector<char> garbage(image.size());
  for (char& c : garbage) c = static_cast<char>(rng());
  std::vector<char> short_file(image.begin(), image.begin() + 100);
  std::vector<char> truncated(image.begin(), image.end() - 4096);

  struct Case {
    const char* what;
    std::vector<char> bytes;
    StatusCode code;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"garbage", garbage, StatusCode::kCorrupt, "bad magic"},
      {"short", short_file, StatusCode::kCorrupt, "shorter than an arena header"},
      {"truncated", truncated, StatusCode::kCorrupt, "its header says"},
      {"newer version", patched(8, uint32_t{3}), StatusCode::kUnsupported, "arena version 3 is newer than this build's 2"},
      {"older version", patched(8, uint32_t{1}), StatusCode::kUnsupported, "arena version 1 is older than this build's 2"},
      {"header size", patched(12, uint32_t{512}), StatusCode::kCorrupt, "header of 512 bytes"},
      {"manifest capacity", patched(16, uint64_t{1} << 40), StatusCode::kCorrupt, "inconsistent geometry"},
      {"data offset", patched(24, uint64_t{4096}), StatusCode::kCorrupt, "inconsistent geometry"},
      {"data capacity", patched(32, uint64_t{1} << 62), StatusCode::kCorrupt, "inconsistent geometry"},
      {"owner field", patched(48, uint32_t{4242}), StatusCode::kCorrupt, "owner uid 4242"},
      {"slot count", patched(64, uint32_t{3}), StatusCode::kCorrupt, "3 slots"},
      {"one slot", patched(64, uint32_t{1}), StatusCode::kCorrupt, "inconsistent geometry"},
  };
  for (const Case& c : cases) {
    std::string path = write_file(std::string("ft-ckpt.bad.") + std::to_string(&c - cases.data()), c.bytes);
    Arena reader;
    Status s = Arena::OpenForRead(path, &reader);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.expect), std::string_view::npos) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(path), std::string_view::npos) << c.what << ": " << s.ToString();
    EXPECT_FALSE(reader.is_open());
  }

  // A symlink is not followed; a directory is not an arena.
  std::string link = dir_.File("ft-ckpt.link.1");
  ASSERT_EQ(symlink(valid_path.c_str(), link.c_str()), 0);
  Arena reader;
  EXPECT_FALSE(Arena::OpenForRead(link, &reader).ok());
  EXPECT_EQ(Arena::OpenForRead(dir_.path(), &reader).code(), StatusCode::kCorrupt);
}

TEST_F(ArenaTest, OpenForReadRefusesAnotherUsersArena) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a file away needs root";
  std::string path;
  {
    Arena writer = OpenWriter();
    path = writer.path();
  }
  ASSERT_EQ(chown(path.c_str(), 4242, 4242), 0);
  Arena reader;
  Status s = Arena::OpenForRead(path, &reader);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("owned by uid 4242"), std::string_view::npos) << s.ToString();
  // The writer does not adopt it either: it makes its own.
  Arena writer = OpenWriter();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
}

TEST_F(ArenaTest, ADamagedCommittedManifestIsCorrupt) {
  Arena writer = OpenWriter();
  SaveSample(&writer);
  int fd = open(writer.path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t byte = 0;
  ASSERT_EQ(pread(fd, &byte, 1, 4096 + 40), 1);
  byte ^= 0x40;
  ASSERT_EQ(pwrite(fd, &byte, 1, 4096 + 40), 1);
  close(fd);
  Manifest m;
  uint64_t generation = 0;
  Status s = writer.ReadCommitted(&m, &generation);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_NE(s.message().find(writer.path()), std::string_view::npos) << s.ToString();
}

TEST_F(ArenaTest, PathForSanitizesTheJob) {
  EXPECT_EQ(Arena::PathFor("/dev/shm", "my job/../x", 3), "/dev/shm/ft-ckpt." + JobToken("my job/../x") + ".3");
  EXPECT_EQ(JobToken("my job/../x").substr(0, 12), "my_job____x-");
  EXPECT_EQ(Arena::PathFor("/dev/shm/", "", 0), "/dev/shm/ft-ckpt." + JobToken("") + ".0");
}

TEST_F(ArenaTest, RankOfAcceptsOnlyArenaNames) {
  EXPECT_EQ(Arena::RankOf("/dev/shm/ft-ckpt.job-a.3"), 3);
  EXPECT_EQ(Arena::RankOf("ft-ckpt.job-a.0"), 0);
  EXPECT_EQ(Arena::RankOf("/x/ft-ckpt.j.2147483647"), 2147483647);
  for (const char* bad : {"/dev/shm/ft-ckpt.job-a.3.tmp.77", "/dev/shm/ft-ckpt.job-a.03", "/dev/shm/ft-ckpt.job-a.x",
                          "/dev/shm/ft-ckpt.job-a.", "/dev/shm/ft-ckpt..3", "/dev/shm/ft-ckpt.3",
                          "/dev/shm/ft-plan.job-a.3", "/dev/shm/ft-ckpt.j.2147483648", "/dev/shm/ft-ckpt.j b.3",
                          "/dev/shm/ft-ckpt.job-a.-3", ""}) {
    EXPECT_EQ(Arena::RankOf(bad), -1) << bad;
  }
}

TEST_F(ArenaTest, ListFindsOneJobsArenasInRankOrder) {
  for (int rank : {10, 0, 2}) {
    Arena arena;
    ASSERT_TRUE(Arena::OpenForWrite(dir_.path(), "job-a", rank, 4096, 4096, 1, &arena).ok());
  }
  Arena other;
  ASSERT_TRUE(Arena::OpenForWrite(dir_.path(), "job-a-b", 1, 4096, 4096, 1, &other).ok());
  for (const char* junk : {"ft-ckpt.job-a.3.tmp.77", "ft-ckpt.job-a.03", "ft-ckpt.job-a.x", "ft-plan.job-a.n1"}) {
    std::ofstream(dir_.File(junk)) << "x";
  }
  EXPECT_EQ(Arena::List(dir_.path(), "job-a"),
            (std::vector<std::string>{dir_.File("ft-ckpt.job-a.0"), dir_.File("ft-ckpt.job-a.2"),
                                      dir_.File("ft-ckpt.job-a.10")}));
  EXPECT_EQ(Arena::List(dir_.path(), "job-a-b"), std::vector<std::string>{dir_.File("ft-ckpt.job-a-b.1")});
  EXPECT_TRUE(Arena::List(dir_.File("absent"), "job-a").empty());
}

// ftworker's prefetch arena: the same format beside the rank's own arena, which it never
// touches, and invisible to List (the keeper reports and persists only the ranks' own copies).
TEST_F(ArenaTest, APrefetchArenaIsAnArenaOfItsOwnNameThatListDoesNotSee) {
  EXPECT_EQ(Arena::PrefetchPathFor("/dev/shm", "my job", 5), "/dev/shm/ft-prefetch." + JobToken("my job") + ".5");
  Arena own = OpenWriter();
  Manifest own_copy = SaveSample(&own, 1);
  Arena prefetch;
  const std::string path = Arena::PrefetchPathFor(dir_.path(), "job-a", 3);
  Status s = Arena::OpenForWriteAt(path, kManifestCapacity, 1 << 20, 1, &prefetch);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Manifest pulled = SaveSample(&prefetch, 2);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, prefetch.mapped_bytes());
  EXPECT_EQ(Files(), (std::vector<std::string>{"ft-ckpt.job-a.3", "ft-prefetch.job-a.3"}));
  EXPECT_EQ(Arena::List(dir_.path(), "job-a"), std::vector<std::string>{dir_.File("ft-ckpt.job-a.3")});
  EXPECT_EQ(Arena::RankOf(path), -1);

  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(path, &reader).ok());
  Manifest m;
  uint64_t generation = 0;
  ASSERT_TRUE(reader.ReadCommitted(&m, &generation).ok());
  EXPECT_EQ(m, pulled);
  Arena own_reader;
  ASSERT_TRUE(Arena::OpenForRead(own.path(), &own_reader).ok());
  ASSERT_TRUE(own_reader.ReadCommitted(&m, &generation).ok());
  EXPECT_EQ(m, own_copy);  // untouched

  // Too large for its directory: refused up front, the file removed, as for an own arena.
  struct statvfs fs {};
  ASSERT_EQ(statvfs(dir_.path().c_str(), &fs), 0);
  Arena huge;
  s = Arena::OpenForWriteAt(dir_.File("ft-prefetch.job-a.4"), kManifestCapacity,
                            static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize * 2, 1, &huge);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find(dir_.path()), std::string_view::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir_.File("ft-prefetch.job-a.4")));
}

TEST_F(ArenaTest, OpenForWriteCleansTempFilesOfADeadWriter) {
  std::ofstream(dir_.File("ft-ckpt.job-a.3.tmp.999999")) << "x";
  Arena writer = OpenWriter();
  EXPECT_EQ(Files(), std::vector<std::string>{"ft-ckpt.job-a.3"});
}

// The seqlock's promise under load: a copy that StillCommitted vouches for is never a mix of
// two saves. The writer runs in another process (as it does in production) and saves
// continuously; the reader copies and keeps only what the generation vouches for.
class ArenaSlotsTest : public ArenaTest, public ::testing::WithParamInterface<int> {};

TEST_P(ArenaSlotsTest, ACopyStillCommittedVouchesForIsNeverTorn) {
  constexpr uint64_t kDataBytes = 256 << 10;
  Arena writer = OpenWriter(kDataBytes, kManifestCapacity, GetParam());
  SaveSample(&writer, 1);
  std::string path = writer.path();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Each save fills the whole region with one byte value and checksums it.
    std::vector<uint8_t> data(kDataBytes);
    for (uint64_t seed = 2;; ++seed) {
      std::vector<BufferEntry> named = {{"all", kDataBytes, 0}};
      Manifest m;
      m.step = static_cast<int64_t>(seed);
      m.chunk_bytes = 64 << 10;
      if (!PlanLayout(named, &m.buffers, &m.data_bytes).ok()) _exit(3);
      uint8_t* dest = writer.BeginWrite();
      for (uint64_t at = 0; at < kDataBytes; at += 4096) std::memset(dest + at, static_cast<int>(seed), 4096);
      std::memset(data.data(), static_cast<int>(seed), kDataBytes);
      for (size_t i = 0; i < m.chunk_count(); ++i) {
        m.chunk_checksums.push_back(Checksum(data.data() + m.chunk_begin(i), m.chunk_end(i) - m.chunk_begin(i)));
      }
      if (!writer.Commit(m).ok()) _exit(4);
      usleep(200);  // a gap between saves, in which whole copies can be read
    }
  }
  Arena reader;
  ASSERT_TRUE(Arena::OpenForRead(path, &reader).ok());
  std::vector<uint8_t> copy(kDataBytes);
  int vouched = 0, discarded = 0, torn_but_vouched = 0;
  std::set<uint64_t> generations;  // of vouched copies: proof the saves ran meanwhile
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline && (generations.size() < 100 || discarded < 100)) {
    Manifest m;
    uint64_t generation = 0;
    if (!reader.ReadCommitted(&m, &generation).ok()) continue;
    std::memcpy(copy.data(), reader.data(generation), m.data_bytes);
    if (!reader.StillCommitted(generation)) {
      ++discarded;
      continue;
    }
    ++vouched;
    generations.insert(generation);
    for (size_t i = 0; i < m.chunk_count(); ++i) {
      if (!ChunkVerifies(m, i, copy.data())) {
        ++torn_but_vouched;
        break;
      }
    }
  }
  int child_status = 0;
  bool child_ended = waitpid(child, &child_status, WNOHANG) == child;
  if (!child_ended) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  EXPECT_FALSE(child_ended) << "the writer failed: status " << child_status;
  EXPECT_EQ(torn_but_vouched, 0);
  EXPECT_GT(generations.size(), 1u);
  RecordProperty("discarded", discarded);
  RecordProperty("vouched", vouched);
  RecordProperty("generations", static_cast<int>(generations.size()));
}

INSTANTIATE_TEST_SUITE_P(Slots, ArenaSlotsTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace ft::ckpt

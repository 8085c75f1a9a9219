#include "jitckpt/restore_loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "jitckpt/checksum.h"
#include "jitckpt/tests/refuse_reservation.h"
#include "jitckpt/tests/sample_manifest.h"
#include "jitckpt/tests/temp_dir.h"
#include "jitckpt/tests/tier_test_util.h"
#include "jitckpt/tier.h"

namespace ft::ckpt {
namespace {

using testing::AlignedBytes;
using testing::AlignedCopy;
using testing::LogCapture;
using testing::FlipBitInFile;
using testing::SampleManifest;
using testing::TempDir;

constexpr int kRank = 3;       // the rank that restores, on node n1
constexpr int kPeer = 7;       // its DP replica on the same node
constexpr int kFarPeer = 11;   // a DP replica on node n2
constexpr int64_t kStep = 1200;

class RestoreLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(scratch_.ok());
    saved_ = SampleManifest(&data_, {5000, 8192, 123}, 4096);
    saved_.job = "job-r";
    saved_.step = kStep;
    for (const BufferEntry& b : saved_.buffers) registered_.push_back(b);
    plan_.job = saved_.job;
    plan_.node = "n1";
    plan_.version = 4;
    plan_.step = kStep;
    plan_.arena_dir = scratch_.path() + "/shm";
    plan_.local_dir = scratch_.path() + "/local";
    plan_.remote_dir = scratch_.path() + "/remote";
    std::filesystem::create_directories(plan_.arena_dir);
    PlanRank line;
    line.rank = kRank;
    line.digest = ContentDigest(saved_);
    line.sources = {{kRank, "n1", {"arena", "local", "remote"}},
                    {kPeer, "n1", {"arena", "local"}},
                    {kFarPeer, "n2", {"arena", "local", "remote"}}};
    plan_.ranks = {line};
  }

  uint64_t ManifestBytes() const {
    return ManifestCapacity(registered_, saved_.data_bytes, saved_.chunk_bytes);
  }

  // The copy as `rank` saved it (its rank and dp in the manifest, the same content).
  Manifest CopyOf(int rank) const {
    Manifest m = saved_;
    m.rank = rank;
    m.dp = rank == kRank ? 1 : rank == kPeer ? 0 : 2;
    return m;
  }

  // Writes `data` into `arena` and commits `m`, as its writer would; `flip_at` > 0 flips a bit
  // of the written data first (a bad page under a good manifest).
  static void CommitInto(Arena& arena, const Manifest& m, const std::vector<uint8_t>& data, uint64_t flip_at = 0) {
    uint8_t* dest = arena.BeginWrite();
    ASSERT_NE(dest, nullptr);
    std::memcpy(dest, data.data(), data.size());
    if (flip_at > 0) dest[flip_at] ^= 0x10;
    Status st = arena.Commit(m);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // Commits `m` with `data` into `rank`'s arena of `slots` slots, as that rank's agent would.
  void SaveToArena(int rank, const Manifest& m, const std::vector<uint8_t>& data, int slots = 2) {
    Arena arena;
    Status st = Arena::OpenForWrite(plan_.arena_dir, plan_.job, rank, ManifestBytes(), m.data_bytes, slots, &arena);
    ASSERT_TRUE(st.ok()) << st.ToString();
    CommitInto(arena, m, data);
  }

  // The same into the arena file at `path` (the worker's prefetch and buddy-copy arenas).
  void SaveAt(const std::string& path, const Manifest& m, const std::vector<uint8_t>& data, int slots,
              uint64_t flip_at = 0) {
    Arena arena;
    Status st = Arena::OpenForWriteAt(path, ManifestBytes(), m.data_bytes, slots, &arena);
    ASSERT_TRUE(st.ok()) << st.ToString();
    CommitInto(arena, m, data, flip_at);
  }

  void SaveToDir(const std::string& dir, const Manifest& m, const std::vector<uint8_t>& data) {
    AlignedBytes src = AlignedCopy(data, 4096);
    Status st = PersistCopy(TierKind::kRemote, dir, m, src.get(), nullptr, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // The restoring rank's arena, opened as its agent opens it at registration.
  void OpenOwn() {
    Status st = Arena::OpenForWrite(plan_.arena_dir, plan_.job, kRank, ManifestBytes(), saved_.data_bytes, 2, &own_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  Status Load(RestoreResult* result, RestoreSink* sink = nullptr) {
    return LoadForRestore(plan_, kRank, plan_.node, registered_, &own_, result, sink, verify_threads_);
  }

  int verify_threads_ = 1;  // ChunkVerifier's helpers

  // Opens the own arena and restores on the plan's node: the result, whose status must be
  // `expected`.
  RestoreResult OpenAndLoad(StatusCode expected = StatusCode::kOk) {
    OpenOwn();
    RestoreResult result;
    Status st = Load(&result);
    EXPECT_EQ(st.code(), expected) << st.ToString();
    return result;
  }

  // Restored from `kind`, the copy the plan source of `rank` names.
  static void ExpectSource(const RestoreResult& r, SourceKind kind, int rank) {
    EXPECT_EQ(r.source_kind, kind) << SourceKindName(r.source_kind) << ": " << r.source;
    EXPECT_EQ(r.source_rank, rank) << r.source;
  }

  // The i-th source tried was `kind` of `rank`'s copy, skipped for `reason`.
  static void ExpectSkipped(const RestoreResult& r, size_t i, SourceKind kind, int rank, SkipReason reason) {
    ASSERT_LT(i, r.skipped.size());
    const SkippedSource& s = r.skipped[i];
    EXPECT_EQ(s.kind, kind) << SourceKindName(s.kind) << ": " << s.line;
    EXPECT_EQ(s.rank, rank) << s.line;
    EXPECT_EQ(s.reason, reason) << SkipReasonName(s.reason) << ", not " << SkipReasonName(reason) << ": " << s.line;
  }

  // The own arena holds the saved step, committed as this rank's, byte for byte.
  void ExpectOwnHoldsTheStep() {
    Manifest m;
    uint64_t generation = 0;
    ASSERT_TRUE(own_.ReadCommitted(&m, &generation).ok());
    EXPECT_EQ(m.step, kStep);
    EXPECT_EQ(m.rank, kRank);
    EXPECT_EQ(ContentDigest(m), ContentDigest(saved_));
    EXPECT_EQ(std::memcmp(own_.data(generation), data_.data(), data_.size()), 0);
  }

  TempDir scratch_{"/tmp"};  // a disk, where O_DIRECT is real
  std::vector<uint8_t> data_;
  Manifest saved_;
  std::vector<BufferEntry> registered_;
  NodePlan plan_;
  Arena own_;
};

TEST_F(RestoreLoaderTest, OwnArenaHoldingTheStepIsVerifiedInPlaceAndNothingIsCopied) {
  SaveToArena(kRank, CopyOf(kRank), data_);
  SaveToArena(kPeer, CopyOf(kPeer), data_);
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  OpenOwn();
  Manifest before;
  uint64_t generation_before = 0;
  ASSERT_TRUE(own_.ReadCommitted(&before, &generation_before).ok());
  RestoreResult result;
  Status st = Load(&result);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectSource(result, SourceKind::kOwnArena, kRank);
  EXPECT_EQ(result.step, kStep);
  EXPECT_EQ(result.manifest, CopyOf(kRank));
  EXPECT_TRUE(result.skipped.empty());
  Manifest after;
  uint64_t generation_after = 0;
  ASSERT_TRUE(own_.ReadCommitted(&after, &generation_after).ok());
  EXPECT_EQ(generation_after, generation_before);  // not rewritten
  ExpectOwnHoldsTheStep();
}

// A newer step saved after the planned one (a preemption that split the ranks over two steps):
// the planned copy is in the own arena's other slot, restored from there in place and made the
// committed copy again; a same-node peer's other slot serves it too.
TEST_F(RestoreLoaderTest, ThePlannedStepInTheOtherSlotIsRestoredAndCommittedAgain) {
  Manifest newer = CopyOf(kRank);
  newer.step = kStep + 1;
  std::vector<uint8_t> other(data_.size(), 0x5a);
  {
    Arena arena;
    ASSERT_TRUE(Arena::OpenForWrite(plan_.arena_dir, plan_.job, kRank, ManifestBytes(), saved_.data_bytes, 2, &arena).ok());
    CommitInto(arena, CopyOf(kRank), data_);
    CommitInto(arena, newer, other);
  }
  OpenOwn();
  RestoreResult result;
  Status st = Load(&result);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectSource(result, SourceKind::kOwnArena, kRank);
  EXPECT_TRUE(result.skipped.empty());
  ExpectOwnHoldsTheStep();  // the committed copy is the planned step again

  Manifest peer_newer = CopyOf(kPeer);
  peer_newer.step = kStep + 1;
  SaveToArena(kPeer, CopyOf(kPeer), data_);
  {
    Arena arena;
    ASSERT_TRUE(Arena::OpenForWrite(plan_.arena_dir, plan_.job, kPeer, ManifestBytes(), saved_.data_bytes, 2, &arena).ok());
    CommitInto(arena, peer_newer, other);
  }
  own_ = Arena();
  std::filesystem::remove(Arena::PathFor(plan_.arena_dir, plan_.job, kRank));
  RestoreResult from_peer = OpenAndLoad();
  ExpectSource(from_peer, SourceKind::kPeerArena, kPeer);
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, SameNodePeerArenaIsNextAndTheCopyBecomesThisRanks) {
  SaveToArena(kPeer, CopyOf(kPeer), data_);
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  LogCapture log;
  RestoreResult result = OpenAndLoad();  // a fresh own arena: nothing committed
  ExpectSource(result, SourceKind::kPeerArena, kPeer);
  ASSERT_EQ(result.skipped.size(), 1u);
  ExpectSkipped(result, 0, SourceKind::kOwnArena, kRank, SkipReason::kNoCommittedCopy);
  // What a person reads: which source was skipped, and which is tried next.
  EXPECT_EQ(log.Count({"own arena skipped", "trying arena of rank 7 next"}), 1u);
  EXPECT_EQ(result.manifest.rank, kRank);
  EXPECT_EQ(result.manifest.dp, -1);  // the peer's dp is not ours; the master's topology says
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, LocalDirectoryIsUsedWhenNoArenaHoldsTheStep) {
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  SaveToDir(plan_.remote_dir, CopyOf(kRank), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kLocalDir, kRank);
  EXPECT_EQ(result.skipped.size(), 2u);  // own arena, rank 7's arena (absent)
  ExpectSkipped(result, 1, SourceKind::kPeerArena, kPeer, SkipReason::kAbsent);
  EXPECT_EQ(result.manifest, CopyOf(kRank));
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, RemoteDirectoryHoldsTheCopyOfAnotherNodesReplica) {
  SaveToDir(plan_.remote_dir, CopyOf(kFarPeer), data_);
  // Rank 11's arena and local copy are on node n2: even where this test's shared directories
  // make them visible, they are not this node's and are not read.
  SaveToArena(kFarPeer, CopyOf(kFarPeer), data_);
  SaveToDir(plan_.local_dir, CopyOf(kFarPeer), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kRemoteDir, kFarPeer);
  EXPECT_EQ(result.source, "remote dir (copy of rank 11)") << "what the log calls it";
  for (const SkippedSource& s : result.skipped) EXPECT_NE(s.rank, kFarPeer) << s.line;
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, ACorruptedChunkInTheLocalCopySendsTheRestoreToTheRemoteOneAndIsLogged) {
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  SaveToDir(plan_.remote_dir, CopyOf(kRank), data_);
  ASSERT_TRUE(FlipBitInFile(DataPath(plan_.local_dir, plan_.job, {kStep, kRank}), saved_.chunk_begin(1) + 3));
  LogCapture log;
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kRemoteDir, kRank);
  // own arena, rank 7's arena, the local copy (bad chunk), rank 7's local copy (absent)
  ASSERT_EQ(result.skipped.size(), 4u);
  ExpectSkipped(result, 2, SourceKind::kLocalDir, kRank, SkipReason::kChunkMismatch);
  ExpectSkipped(result, 3, SourceKind::kLocalDir, kPeer, SkipReason::kAbsent);
  // What a person reads: the source, the chunk, what is tried next.
  EXPECT_EQ(log.Count({"W ft[ckpt]", "local dir skipped", "chunk 1 ",
                       "trying local dir (copy of rank 7) next"}),
            1u);
  EXPECT_EQ(log.Count({"W ft[ckpt]", "local dir (copy of rank 7) skipped", "trying remote dir next"}), 1u);
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, ATruncatedLocalCopyIsSkipped) {
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  SaveToDir(plan_.remote_dir, CopyOf(kRank), data_);
  ASSERT_EQ(::truncate(DataPath(plan_.local_dir, plan_.job, {kStep, kRank}).c_str(), 4096), 0);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kRemoteDir, kRank);
  ASSERT_GE(result.skipped.size(), 3u);
  ExpectSkipped(result, 2, SourceKind::kLocalDir, kRank, SkipReason::kTruncated);
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, ATornCopyIsSkipped) {
  Manifest torn = CopyOf(kPeer);
  torn.torn = true;
  SaveToArena(kPeer, torn, data_);
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kLocalDir, kRank);
  ASSERT_GT(result.skipped.size(), 1u);
  ExpectSkipped(result, 1, SourceKind::kPeerArena, kPeer, SkipReason::kTorn);
  ExpectOwnHoldsTheStep();
}

// Rank 7's agent starts its next save: with two slots its committed copy is still read; with
// one the save is overwriting it and the peer arena is skipped.
TEST_F(RestoreLoaderTest, APeerArenaInTheMiddleOfANewSaveIsReadOnlyWithTwoSlots) {
  SaveToArena(kPeer, CopyOf(kPeer), data_);
  {
    Arena peer_writer;
    ASSERT_TRUE(Arena::OpenForWrite(plan_.arena_dir, plan_.job, kPeer, ManifestBytes(), saved_.data_bytes, 2,
                                    &peer_writer)
                    .ok());
    std::memset(peer_writer.BeginWrite(), 0xee, data_.size());
    RestoreResult result = OpenAndLoad();
    ExpectSource(result, SourceKind::kPeerArena, kPeer);
    ExpectOwnHoldsTheStep();
  }
  std::filesystem::remove(Arena::PathFor(plan_.arena_dir, plan_.job, kRank));
  std::filesystem::remove(Arena::PathFor(plan_.arena_dir, plan_.job, kPeer));
  SaveToArena(kPeer, CopyOf(kPeer), data_, /*slots=*/1);
  Arena peer_writer;
  ASSERT_TRUE(Arena::OpenForWrite(plan_.arena_dir, plan_.job, kPeer, ManifestBytes(), saved_.data_bytes, 1,
                                  &peer_writer)
                  .ok());
  peer_writer.BeginWrite();
  SaveToDir(plan_.remote_dir, CopyOf(kRank), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kRemoteDir, kRank);
  ASSERT_GT(result.skipped.size(), 1u);
  ExpectSkipped(result, 1, SourceKind::kPeerArena, kPeer, SkipReason::kNoCommittedCopy);
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, ACopyWhoseDigestDiffersFromTheVerifiedOneIsSkipped) {
  // Rank 7 holds step 1200 too, but with other bytes (the odd replica out).
  std::vector<uint8_t> odd;
  Manifest odd_m = SampleManifest(&odd, {5000, 8192, 123}, 4096, /*seed=*/5);
  odd_m.job = plan_.job;
  odd_m.step = kStep;
  odd_m.rank = kPeer;
  SaveToArena(kPeer, odd_m, odd);
  SaveToDir(plan_.remote_dir, CopyOf(kRank), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kRemoteDir, kRank);
  ASSERT_GT(result.skipped.size(), 1u);
  ExpectSkipped(result, 1, SourceKind::kPeerArena, kPeer, SkipReason::kDigestMismatch);
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, ACopyOfAnotherStepIsSkipped) {
  Manifest older = CopyOf(kRank);
  older.step = 1100;
  SaveToArena(kRank, older, data_);
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kLocalDir, kRank);
  ASSERT_GT(result.skipped.size(), 0u);
  ExpectSkipped(result, 0, SourceKind::kOwnArena, kRank, SkipReason::kOtherStep);
  // What a person reads: both steps.
  EXPECT_NE(result.skipped[0].line.find("holds step 1100, the plan restores step 1200"), std::string::npos)
      << result.skipped[0].line;
  ExpectOwnHoldsTheStep();
}

TEST_F(RestoreLoaderTest, NoUsableSourceIsCorruptAndEverySourceSaysWhy) {
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  ASSERT_TRUE(FlipBitInFile(DataPath(plan_.local_dir, plan_.job, {kStep, kRank}), 0));
  OpenOwn();
  LogCapture log;
  RestoreResult result;
  Status st = Load(&result);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.ToString();
  // own arena, rank 7's arena, local dir (ours, rank 7's), remote dir (ours, rank 11's)
  EXPECT_EQ(result.skipped.size(), 6u);
  ExpectSkipped(result, 2, SourceKind::kLocalDir, kRank, SkipReason::kChunkMismatch);
  ExpectSkipped(result, 5, SourceKind::kRemoteDir, kFarPeer, SkipReason::kAbsent);
  EXPECT_EQ(log.Count({"skipped", "no source left"}), 1u);
  EXPECT_NE(st.message().find("chunk 0 "), std::string_view::npos) << st.ToString();
  // The failed copy into the own arena left it empty, never half-written and committed.
  Manifest m;
  uint64_t generation = 0;
  EXPECT_EQ(own_.ReadCommitted(&m, &generation).code(), StatusCode::kNotFound);
}

// The own arena opened as libft.so opens it (its data regions reserved later, by the agent):
// where the reservation of the slot a copy goes to fails (a full /dev/shm), the arena closes
// and every source that would write it is skipped saying so — an error, never a SIGBUS.
TEST_F(RestoreLoaderTest, AnOwnArenaThatCannotReserveItsSlotSkipsEverySourceSayingWhy) {
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  SaveToDir(plan_.remote_dir, CopyOf(kRank), data_);
  ASSERT_TRUE(Arena::OpenForWrite(plan_.arena_dir, plan_.job, kRank, ManifestBytes(), saved_.data_bytes, 2, &own_,
                                  ArenaPrep::kByWriter)
                  .ok());
  ASSERT_TRUE(testing::RefuseReservations(own_.path()));
  RestoreResult result;
  Status st = Load(&result);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(own_.is_open());
  // own arena (no copy), rank 7's arena (absent), local dir (ours: nowhere to go; rank 7's:
  // absent), remote dir (ours: nowhere to go; rank 11's: absent)
  ASSERT_EQ(result.skipped.size(), 6u);
  ExpectSkipped(result, 2, SourceKind::kLocalDir, kRank, SkipReason::kUnreadable);
  ExpectSkipped(result, 4, SourceKind::kRemoteDir, kRank, SkipReason::kUnreadable);
  for (size_t i : {2, 4}) {
    EXPECT_NE(result.skipped[i].line.find("could not be reserved"), std::string::npos) << result.skipped[i].line;
  }
}

// Two slots: a restore whose every source fails leaves the own arena's older copy committed
// and whole (a later plan may still want it); the copies tried went to the other slot.
TEST_F(RestoreLoaderTest, AFailedRestoreKeepsTheOwnArenasOlderCopy) {
  Manifest older = CopyOf(kRank);
  older.step = kStep - 100;
  std::vector<uint8_t> older_data(data_.size(), 0x3c);
  for (size_t i = 0; i < older.chunk_count(); ++i) {
    older.chunk_checksums[i] = Checksum(older_data.data() + older.chunk_begin(i), older.chunk_end(i) - older.chunk_begin(i));
  }
  SaveToArena(kRank, older, older_data);
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  ASSERT_TRUE(FlipBitInFile(DataPath(plan_.local_dir, plan_.job, {kStep, kRank}), 0));
  OpenOwn();
  RestoreResult result;
  EXPECT_EQ(Load(&result).code(), StatusCode::kCorrupt);
  Manifest m;
  uint64_t generation = 0;
  ASSERT_TRUE(own_.ReadCommitted(&m, &generation).ok());
  EXPECT_EQ(m, older);
  EXPECT_EQ(std::memcmp(own_.data(generation), older_data.data(), older_data.size()), 0);
  EXPECT_EQ(own_.write_data(), nullptr) << "the write was given up";
}

// What the agent does with verified chunks (copies them to the device), written down: the
// order of calls ("begin" for SourceBegins, the chunk index otherwise) and the bytes, copied
// into a buffer of its own as each arrives.
class RecordingSink : public RestoreSink {
 public:
  explicit RecordingSink(size_t bytes) : device(bytes, 0xee) {}
  void SourceBegins() override { calls.push_back("begin"); }
  void Verified(const Manifest& m, size_t chunk, const uint8_t* data) override {
    calls.push_back(std::to_string(chunk));
    std::memcpy(device.data() + m.chunk_begin(chunk), data + m.chunk_begin(chunk),
                m.chunk_end(chunk) - m.chunk_begin(chunk));
  }
  std::vector<std::string> calls;
  std::vector<uint8_t> device;
};

std::vector<std::string> Chunks(size_t from, size_t to) {
  std::vector<std::string> out;
  for (size_t i = from; i < to; ++i) out.push_back(std::to_string(i));
  return out;
}

TEST_F(RestoreLoaderTest, EveryChunkGoesToTheSinkOnceAsItVerifiesFromTheOwnArena) {
  SaveToArena(kRank, CopyOf(kRank), data_);
  OpenOwn();
  RecordingSink sink(data_.size());
  RestoreResult result;
  Status st = Load(&result, &sink);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectSource(result, SourceKind::kOwnArena, kRank);
  ASSERT_GT(saved_.chunk_count(), 2u);
  EXPECT_EQ(sink.calls, Chunks(0, saved_.chunk_count()));
  EXPECT_EQ(sink.device, data_);
}

// With helpers checking chunks ahead (ChunkVerifier), the sink still gets every chunk once, in
// order; a bad chunk of the own arena stops it there and the peer's arena, copied and checked on
// the helpers, gives every chunk again.
TEST_F(RestoreLoaderTest, HelpersCheckAheadAndTheSinkStillGetsEachChunkOnceInOrder) {
  verify_threads_ = 4;
  SaveToArena(kRank, CopyOf(kRank), data_);
  OpenOwn();
  {
    RecordingSink sink(data_.size());
    RestoreResult result;
    Status st = Load(&result, &sink);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectSource(result, SourceKind::kOwnArena, kRank);
    EXPECT_EQ(sink.calls, Chunks(0, saved_.chunk_count()));
    EXPECT_EQ(sink.device, data_);
  }
  own_ = Arena();
  std::filesystem::remove(Arena::PathFor(plan_.arena_dir, plan_.job, kRank));
  const size_t bad = 2;
  {
    Arena arena;
    ASSERT_TRUE(Arena::OpenForWrite(plan_.arena_dir, plan_.job, kRank, ManifestBytes(), saved_.data_bytes, 2, &arena).ok());
    CommitInto(arena, CopyOf(kRank), data_, saved_.chunk_begin(bad) + 3);
  }
  SaveToArena(kPeer, CopyOf(kPeer), data_);
  OpenOwn();
  RecordingSink sink(data_.size());
  RestoreResult result;
  Status st = Load(&result, &sink);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectSource(result, SourceKind::kPeerArena, kPeer);
  ExpectSkipped(result, 0, SourceKind::kOwnArena, kRank, SkipReason::kChunkMismatch);
  std::vector<std::string> expected = Chunks(0, bad);
  expected.push_back("begin");
  for (const std::string& c : Chunks(0, saved_.chunk_count())) expected.push_back(c);
  EXPECT_EQ(sink.calls, expected);
  EXPECT_EQ(sink.device, data_);
  ExpectOwnHoldsTheStep();
}

// A source that fails midway gave the sink the chunks before the bad one (they verified, and
// every source holds the same bytes); the next source begins with SourceBegins and gives every
// chunk again. The bad chunk never reaches the sink.
TEST_F(RestoreLoaderTest, AfterASourceFailsMidwayTheNextOneGivesTheSinkEveryChunkAgain) {
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  SaveToDir(plan_.remote_dir, CopyOf(kRank), data_);
  ASSERT_TRUE(FlipBitInFile(DataPath(plan_.local_dir, plan_.job, {kStep, kRank}), saved_.chunk_begin(2) + 5));
  OpenOwn();
  RecordingSink sink(data_.size());
  RestoreResult result;
  Status st = Load(&result, &sink);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ExpectSource(result, SourceKind::kRemoteDir, kRank);
  std::vector<std::string> expected = Chunks(0, 2);  // the local copy's chunks 0 and 1
  expected.push_back("begin");
  for (const std::string& c : Chunks(0, saved_.chunk_count())) expected.push_back(c);
  EXPECT_EQ(sink.calls, expected);
  EXPECT_EQ(sink.device, data_);
}

// Every source fails: what the sink got is verified bytes only, and the caller learns from
// the status that the restore failed (the agent then says the buffers hold part of it).
TEST_F(RestoreLoaderTest, WhenEverySourceFailsTheSinkGotOnlyVerifiedChunks) {
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  ASSERT_TRUE(FlipBitInFile(DataPath(plan_.local_dir, plan_.job, {kStep, kRank}), saved_.chunk_begin(1)));
  OpenOwn();
  RecordingSink sink(data_.size());
  RestoreResult result;
  EXPECT_EQ(Load(&result, &sink).code(), StatusCode::kCorrupt);
  // Chunk 0 of the local copy; the next source (rank 7's local copy, absent) began and gave none.
  EXPECT_EQ(sink.calls, (std::vector<std::string>{"0", "begin"}));
  EXPECT_EQ(std::memcmp(sink.device.data(), data_.data(), saved_.chunk_end(0)), 0);
  for (size_t i = saved_.chunk_end(0); i < sink.device.size(); ++i) ASSERT_EQ(sink.device[i], 0xee) << i;
}

TEST_F(RestoreLoaderTest, ACopyWithMoreChunksThanTheArenaHasRoomForIsSkippedNotFatal) {
  // Saved with 512-byte chunks; this run's arena reserves a manifest of 64 KiB chunks.
  saved_ = SampleManifest(&data_, {5000, 8192, 123}, 512);
  saved_.job = plan_.job;
  saved_.step = kStep;
  plan_.ranks[0].digest = ContentDigest(saved_);
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  ASSERT_TRUE(Arena::OpenForWrite(plan_.arena_dir, plan_.job, kRank,
                                  ManifestCapacity(registered_, saved_.data_bytes, 64 << 10),
                                  saved_.data_bytes, 2, &own_)
                  .ok());
  RestoreResult result;
  Status st = Load(&result);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.ToString();  // every source failed
  ASSERT_GT(result.skipped.size(), 2u);
  ExpectSkipped(result, 2, SourceKind::kLocalDir, kRank, SkipReason::kChunkSizeChanged);
  // What a person reads: the setting to check.
  EXPECT_NE(result.skipped[2].line.find("FT_CKPT_CHUNK"), std::string::npos) << result.skipped[2].line;
}

TEST_F(RestoreLoaderTest, APlanWithoutAStepOrWithoutThisRankIsNotFound) {
  OpenOwn();
  RestoreResult result;
  plan_.step = -1;
  EXPECT_EQ(Load(&result).code(), StatusCode::kNotFound);
  plan_.step = kStep;
  plan_.ranks[0].rank = 4;
  EXPECT_EQ(Load(&result).code(), StatusCode::kNotFound);
  EXPECT_EQ(result.step, -1);  // untouched
}

TEST_F(RestoreLoaderTest, ALayoutMismatchRestoresNothingAndLeavesTheOwnArenaAsItWas) {
  SaveToArena(kRank, CopyOf(kRank), data_);
  // Registered now: the same sizes, another name (same length, so the arena keeps its copy).
  registered_[2].name = "parxm.2";
  OpenOwn();
  Manifest before;
  uint64_t generation_before = 0;
  ASSERT_TRUE(own_.ReadCommitted(&before, &generation_before).ok());
  RestoreResult result;
  Status st = Load(&result);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("param.2"), std::string_view::npos) << st.ToString();
  EXPECT_NE(st.message().find("parxm.2"), std::string_view::npos) << st.ToString();
  Manifest after;
  uint64_t generation_after = 0;
  ASSERT_TRUE(own_.ReadCommitted(&after, &generation_after).ok());
  EXPECT_EQ(after, before);
  EXPECT_EQ(generation_after, generation_before);
  EXPECT_EQ(std::memcmp(own_.data(generation_after), data_.data(), data_.size()), 0);
}

TEST_F(RestoreLoaderTest, ALayoutMismatchOfADirectoryCopyDoesNotTouchTheOwnArena) {
  SaveToDir(plan_.local_dir, CopyOf(kRank), data_);
  registered_[0].name = "parxm.0";
  OpenOwn();
  RestoreResult result;
  EXPECT_EQ(Load(&result).code(), StatusCode::kInvalidArgument);
  // Own arena was empty and stays so; no write began.
  Manifest m;
  uint64_t generation = 0;
  EXPECT_EQ(own_.ReadCommitted(&m, &generation).code(), StatusCode::kNotFound);
}


// Rank 3 relaunched on n9, whose worker keeps buddy copies of n1's ranks (ftworker/prefetch/replicator.h):
// the plan lists <3>:n9:replica (and a replica's remote copy); the buddy copy on this node is
// read, verified, and becomes the rank's own; a corrupted one is skipped for the next source.
class BuddyRestoreTest : public RestoreLoaderTest {
 protected:
  void SetUp() override {
    RestoreLoaderTest::SetUp();
    plan_.node = "n9";
    plan_.ranks[0].sources = {{kRank, "n1", {"arena"}}, {kRank, "n9", {"replica"}}, {kFarPeer, "n2", {"remote"}}};
  }

  // The replica arena as the replicator commits it (two slots): the rank's own manifest.
  void SaveToReplica(const Manifest& m, const std::vector<uint8_t>& data, uint8_t flip_at = 0) {
    SaveAt(Arena::ReplicaPathFor(plan_.arena_dir, plan_.job, kRank), m, data, 2, flip_at);
  }
};

TEST_F(BuddyRestoreTest, TheBuddyCopyOnThisNodeIsReadVerifiedAndBecomesThisRanks) {
  SaveToReplica(CopyOf(kRank), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kBuddyCopy, kRank);
  ExpectOwnHoldsTheStep();
}

TEST_F(BuddyRestoreTest, ACorruptedBuddyCopyIsSkippedForTheNextSource) {
  SaveToReplica(CopyOf(kRank), data_, /*flip_at=*/77);
  SaveToDir(plan_.remote_dir, CopyOf(kFarPeer), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kRemoteDir, kFarPeer);
  // own arena (empty on this node), then the buddy copy: a bad chunk.
  ASSERT_GE(result.skipped.size(), 2u);
  ExpectSkipped(result, 1, SourceKind::kBuddyCopy, kRank, SkipReason::kChunkMismatch);
  ExpectOwnHoldsTheStep();
}

// A replacement node n9: rank 3 ran on n1 before (its remote copy remains), its DP replica
// rank 11 is on n2, and n9's worker prefetched rank 11's copy from n2 before rank 3 started.
class PrefetchedRestoreTest : public RestoreLoaderTest {
 protected:
  void SetUp() override {
    RestoreLoaderTest::SetUp();
    plan_.node = "n9";
    plan_.ranks[0].sources = {{kRank, "n9", {"prefetched"}},
                              {kRank, "n1", {"remote"}},
                              {kFarPeer, "n2", {"arena", "local", "remote"}}};
  }

  // The prefetch arena as ftworker's prefetcher commits it (one slot): the pulled manifest, as is.
  void SaveToPrefetch(const Manifest& m, const std::vector<uint8_t>& data) {
    SaveAt(Arena::PrefetchPathFor(plan_.arena_dir, plan_.job, kRank), m, data, 1);
  }

  // Flips a bit of the prefetch arena's data after its commit (a bad page).
  void CorruptPrefetched(uint64_t offset) {
    Arena arena;
    Status st = Arena::OpenForWriteAt(Arena::PrefetchPathFor(plan_.arena_dir, plan_.job, kRank),
                                      ManifestBytes(), saved_.data_bytes, 1, &arena);
    ASSERT_TRUE(st.ok()) << st.ToString();
    Manifest m;
    uint64_t generation = 0;
    ASSERT_TRUE(arena.ReadCommitted(&m, &generation).ok());
    const_cast<uint8_t*>(arena.data(generation))[offset] ^= 0x20;
  }
};

TEST_F(PrefetchedRestoreTest, ThePrefetchedCopyIsReadLocallyVerifiedAndBecomesThisRanks) {
  SaveToPrefetch(CopyOf(kFarPeer), data_);
  SaveToDir(plan_.remote_dir, CopyOf(kFarPeer), data_);
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kPrefetched, kRank);
  ASSERT_EQ(result.skipped.size(), 1u);  // the own arena, empty on a new node
  EXPECT_EQ(result.manifest.rank, kRank);
  EXPECT_EQ(result.manifest.dp, -1);  // rank 11's dp is not ours
  ExpectOwnHoldsTheStep();
  // Read-only: the prefetched copy is still committed, unchanged.
  Arena prefetched;
  ASSERT_TRUE(Arena::OpenForRead(Arena::PrefetchPathFor(plan_.arena_dir, plan_.job, kRank), &prefetched).ok());
  Manifest m;
  uint64_t generation = 0;
  ASSERT_TRUE(prefetched.ReadCommitted(&m, &generation).ok());
  EXPECT_EQ(m, CopyOf(kFarPeer));
}

TEST_F(PrefetchedRestoreTest, ACorruptedPrefetchedChunkSendsTheRestoreToTheNextSource) {
  SaveToPrefetch(CopyOf(kFarPeer), data_);
  CorruptPrefetched(saved_.chunk_begin(2) + 9);
  SaveToDir(plan_.remote_dir, CopyOf(kFarPeer), data_);
  LogCapture log;
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kRemoteDir, kFarPeer);
  ASSERT_GE(result.skipped.size(), 2u);
  ExpectSkipped(result, 1, SourceKind::kPrefetched, kRank, SkipReason::kChunkMismatch);
  // What a person reads: the source and the chunk.
  EXPECT_EQ(log.Count({"W ft[ckpt]", "prefetched copy skipped", "chunk 2 "}), 1u);
  ExpectOwnHoldsTheStep();
}

TEST_F(PrefetchedRestoreTest, APrefetchedCopyOfAnotherStepOrDigestOrTornIsSkipped) {
  Manifest other_step = CopyOf(kFarPeer);
  other_step.step = kStep - 100;
  Manifest torn = CopyOf(kFarPeer);
  torn.torn = true;
  Manifest other_digest = CopyOf(kFarPeer);
  other_digest.chunk_checksums[0] ^= 1;
  const std::pair<Manifest, SkipReason> cases[] = {{other_step, SkipReason::kOtherStep},
                                                   {torn, SkipReason::kTorn},
                                                   {other_digest, SkipReason::kDigestMismatch}};
  for (const auto& [m, reason] : cases) {
    SaveToPrefetch(m, data_);
    SaveToDir(plan_.remote_dir, CopyOf(kFarPeer), data_);
    RestoreResult result = OpenAndLoad();
    ExpectSource(result, SourceKind::kRemoteDir, kFarPeer);
    ASSERT_GE(result.skipped.size(), 2u);
    ExpectSkipped(result, 1, SourceKind::kPrefetched, kRank, reason);
    ExpectOwnHoldsTheStep();
    own_ = Arena();
    ASSERT_EQ(::unlink(Arena::PathFor(plan_.arena_dir, plan_.job, kRank).c_str()), 0);
  }
}

TEST_F(PrefetchedRestoreTest, APrefetchFileThePlanDoesNotListIsNotRead) {
  SaveToPrefetch(CopyOf(kFarPeer), data_);  // e.g. left from an earlier plan
  SaveToDir(plan_.remote_dir, CopyOf(kFarPeer), data_);
  plan_.ranks[0].sources.erase(plan_.ranks[0].sources.begin());
  RestoreResult result = OpenAndLoad();
  ExpectSource(result, SourceKind::kRemoteDir, kFarPeer);
  for (const SkippedSource& s : result.skipped) EXPECT_NE(s.kind, SourceKind::kPrefetched) << s.line;
}

}  // namespace
}  // namespace ft::ckpt

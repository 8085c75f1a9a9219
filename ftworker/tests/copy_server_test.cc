// What a worker serves to peers: region names parsed strictly, and the CopyProvider over real
// arenas and a real local tier in temporary directories (the keeper finds the arenas). Only
// committed, untorn copies of this node's ranks of the named step are served; an overwritten
// copy stops being valid under a reader. Also the listen-address rule (FT_LISTEN).
#include "ftworker/transfer/copy_server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "ftworker/ckpt/ckpt_keeper.h"
#include "ftworker/transfer/listen_address.h"
#include "ftworker/transfer/region_name.h"
#include "ftworker/ckpt/tests/ckpt_test_util.h"
#include "ftworker/monitor/tests/test_util.h"
#include "jitckpt/tier.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;
using namespace std::chrono_literals;

// ---- region names ---------------------------------------------------------------------------

TEST(RegionNameTest, FormatsAndParsesBothPlaces) {
  EXPECT_EQ(FormatRegionName(CopyPlace::kArena, 1200, 5), "arena/1200/5");
  EXPECT_EQ(FormatRegionName(CopyPlace::kLocal, 0, 0), "local/0/0");
  for (const RegionName& n : {RegionName{CopyPlace::kArena, 1200, 5}, RegionName{CopyPlace::kLocal, 0, 0},
                              RegionName{CopyPlace::kArena, 999999999999999999, 999999999}}) {
    RegionName parsed;
    ASSERT_TRUE(ParseRegionName(FormatRegionName(n.place, n.step, n.rank), &parsed).ok());
    EXPECT_EQ(parsed, n);
  }
}

TEST(RegionNameTest, AnythingElseIsRefusedAndNamed) {
  const std::string with_nul("arena/1/2\0", 10);
  for (std::string_view bad :
       {std::string_view(""), std::string_view("arena"), std::string_view("arena/1"),
        std::string_view("arena/1/"), std::string_view("arena//1"), std::string_view("/1/2"),
        std::string_view("arena/01/2"), std::string_view("arena/1/02"), std::string_view("arena/-1/2"),
        std::string_view("arena/+1/2"), std::string_view("arena/1/2/3"), std::string_view("arena/1/ 2"),
        std::string_view("arena/1/2 "), std::string_view("ARENA/1/2"), std::string_view("remote/1/2"),
        std::string_view("arena/1234567890123456789/2"), std::string_view("arena/1/1234567890"),
        std::string_view("arena/0x10/2"), std::string_view(with_nul),
        std::string_view("arena/1/2/../../etc/passwd")}) {
    RegionName parsed{CopyPlace::kLocal, 7, 7};
    Status s = ParseRegionName(bad, &parsed);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(s.message().find("expected arena/<step>/<rank>"), std::string_view::npos) << s.ToString();
    EXPECT_EQ(parsed, (RegionName{CopyPlace::kLocal, 7, 7})) << "output set on failure";
  }
  RegionName parsed;
  Status s = ParseRegionName(std::string(500, 'a'), &parsed);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_LT(s.message().size(), 200u) << "a foreign name is quoted bounded";
}

// ---- the provider ---------------------------------------------------------------------------

constexpr int64_t kUnixMs = 1'700'000'000'000;

class CopyProviderTest : public ::testing::Test {
 protected:
  CopyProviderTest()
      : job_(UniqueJob("cs")), tmp_("copies"), arena_dir_(tmp_.Sub("shm")), local_(tmp_.Sub("local")) {}

  // A keeper that has seen `node_ranks` and scanned the arenas once.
  void Keep(std::vector<int> node_ranks) {
    if (!keeper_) {
      CkptKeeperOptions o;
      o.job = job_;
      o.node = "node0";
      o.arena_dir = arena_dir_;
      o.scan_interval_ns = 1;
      keeper_ = std::make_unique<CkptKeeper>(std::move(o));
    }
    keeper_->Tick(++tick_, kUnixMs, node_ranks);
  }

  CopyProvider Provider(std::string local_dir = "") {
    CopyProviderOptions o;
    o.job = job_;
    o.local_dir = std::move(local_dir);
    o.arena_path_of = [this](ckpt::CopyId id) { return keeper_ ? keeper_->ArenaPathOf(id) : std::string(); };
    o.arena_paths = [this] { return keeper_ ? keeper_->ArenaPaths() : std::vector<std::string>(); };
    o.mapped = [this](const uint8_t* data, uint64_t bytes) { mapped_.emplace_back(data, bytes); };
    o.unmapped = [this](const uint8_t* data, uint64_t bytes) { unmapped_.emplace_back(data, bytes); };
    return CopyProvider(std::move(o));
  }

  // What the fast-path hooks were told, in order (a verbs server registers and forgets these).
  std::vector<std::pair<const uint8_t*, uint64_t>> mapped_, unmapped_;

  static std::shared_ptr<const rdma::Region> MustOpen(CopyProvider& p, const std::string& name) {
    std::shared_ptr<const rdma::Region> region;
    Status s = p.Open(name, &region);
    EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
    return region;
  }

  // The region holds exactly the copy `m` describes: meta is its manifest, every chunk verifies.
  static void ExpectCopy(const rdma::Region& region, const ckpt::Manifest& m, uint8_t fill) {
    ckpt::Manifest meta;
    std::string_view bytes = region.meta();
    ASSERT_TRUE(ckpt::ParseManifest({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, &meta).ok());
    EXPECT_EQ(meta, m);
    ASSERT_EQ(region.size(), m.data_bytes);
    for (size_t i = 0; i < m.chunk_count(); ++i) EXPECT_TRUE(ckpt::ChunkVerifies(m, i, region.data())) << i;
    EXPECT_EQ(region.data()[0], fill);
    EXPECT_EQ(region.data()[region.size() - 1], fill);
    EXPECT_TRUE(region.StillValid());
  }

  std::string job_;
  TempDir tmp_;
  std::string arena_dir_, local_;
  std::unique_ptr<CkptKeeper> keeper_;
  uint64_t tick_ = 0;
};

TEST_F(CopyProviderTest, ServesACommittedArenaCopyOfThisNodesRank) {
  FakeArena arena(arena_dir_, job_, 3, 3 << 20);
  ckpt::Manifest m = arena.Save(5, 0x5a);
  Keep({3});
  CopyProvider p = Provider();
  auto region = MustOpen(p, "arena/5/3");
  ASSERT_NE(region, nullptr);
  ExpectCopy(*region, m, 0x5a);
}

TEST_F(CopyProviderTest, RefusesWhatThisNodeDoesNotHold) {
  FakeArena mine(arena_dir_, job_, 3, 1 << 20);
  FakeArena other_nodes(arena_dir_, job_, 4, 1 << 20);  // same directory, a rank never seen here
  FakeArena other_job(arena_dir_, job_ + "x", 3, 1 << 20);
  mine.Save(5, 1);
  other_nodes.Save(5, 2);
  other_job.Save(6, 3);
  Keep({3});
  CopyProvider p = Provider(local_);
  std::shared_ptr<const rdma::Region> region;
  for (const char* name : {"arena/6/3", "arena/5/4", "arena/4/3", "local/5/3", "local/5/4"}) {
    Status s = p.Open(name, &region);
    EXPECT_EQ(s.code(), StatusCode::kNotFound) << name << ": " << s.ToString();
    EXPECT_NE(s.message().find("this node holds no servable"), std::string_view::npos) << s.ToString();
    EXPECT_EQ(region, nullptr);
  }
  EXPECT_EQ(p.Open("arena/5/3/", &region).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Open("tier/5/3", &region).code(), StatusCode::kInvalidArgument);
  // Without a keeper's word even an arena of the right name is not served.
  CopyProviderOptions no_keeper;
  no_keeper.job = job_;
  CopyProvider blind(std::move(no_keeper));
  EXPECT_EQ(blind.Open("arena/5/3", &region).code(), StatusCode::kNotFound);
}

TEST_F(CopyProviderTest, AForeignArenaUnderThisNodesNameIsRefused) {
  // The keeper's word is re-checked against the arena itself: a file holding another job's or
  // rank's copy (renamed, or a lying index) is never served under this name.
  FakeArena foreign(arena_dir_, job_ + "x", 7, 1 << 20);
  foreign.Save(5, 9);
  CopyProviderOptions o;
  o.job = job_;
  o.arena_path_of = [&](ckpt::CopyId) { return foreign.path(); };
  CopyProvider p(std::move(o));
  std::shared_ptr<const rdma::Region> region;
  Status s = p.Open("arena/5/7", &region);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("job '" + job_ + "x'"), std::string_view::npos) << s.ToString();
  s = p.Open("arena/5/2", &region);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
}

TEST_F(CopyProviderTest, TornAndInProgressCopiesAreRefused) {
  FakeArena arena(arena_dir_, job_, 0, 1 << 20);
  arena.Save(8, 1, /*torn=*/true);
  Keep({0});
  CopyProvider p = Provider();
  std::shared_ptr<const rdma::Region> region;
  Status s = p.Open("arena/8/0", &region);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("torn"), std::string_view::npos) << s.ToString();

  arena.Save(9, 2);
  Keep({0});
  MustOpen(p, "arena/9/0");
  arena.BeginSave();  // two slots: the save writes the other one, step 9 is still committed
  MustOpen(p, "arena/9/0");

  FakeArena one_slot(arena_dir_, job_, 1, 1 << 20, 1 << 20, /*slots=*/1);
  one_slot.Save(9, 2);
  Keep({0, 1});
  MustOpen(p, "arena/9/1");
  one_slot.BeginSave();  // one slot: the save is overwriting step 9 now, nothing to serve
  s = p.Open("arena/9/1", &region);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
}

TEST_F(CopyProviderTest, AnOverwrittenCopyIsNoLongerValidUnderItsReader) {
  FakeArena arena(arena_dir_, job_, 2, 2 << 20);
  ckpt::Manifest m = arena.Save(10, 0x10);
  Keep({2});
  CopyProvider p = Provider();
  auto region = MustOpen(p, "arena/10/2");
  ExpectCopy(*region, m, 0x10);
  arena.BeginSave();
  EXPECT_TRUE(region->StillValid()) << "the save writes the other slot";
  arena.Save(11, 0x11);
  EXPECT_TRUE(region->StillValid()) << "step 11 replaced step 10 as the committed copy, its bytes are intact";
  ExpectCopy(*region, m, 0x10);
  arena.BeginSave();
  EXPECT_FALSE(region->StillValid()) << "the next save began over the bytes being read";
  // Before the keeper's next scan its index still says step 10: the arena is re-checked.
  std::shared_ptr<const rdma::Region> stale;
  Status s = p.Open("arena/10/2", &stale);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("now holds"), std::string_view::npos) << s.ToString();
  Keep({2});
  auto fresh = MustOpen(p, "arena/11/2");
  EXPECT_TRUE(fresh->StillValid());
  EXPECT_EQ(fresh->data()[0], 0x11);
}

TEST_F(CopyProviderTest, KeepsTheMappingAndReopensAReplacedFile) {
  auto first = std::make_unique<FakeArena>(arena_dir_, job_, 1, 1 << 20);
  first->Save(3, 0x33);
  Keep({1});
  CopyProvider p = Provider();
  auto a = MustOpen(p, "arena/3/1");
  auto b = MustOpen(p, "arena/3/1");
  EXPECT_EQ(a->data(), b->data()) << "one mapping for both opens";
  EXPECT_EQ(p.mapped_arenas(), 1u);

  // The rank re-registers with another geometry: the file is replaced (unlinked, recreated).
  struct stat before {};
  ASSERT_EQ(stat(first->path().c_str(), &before), 0);
  first.reset();
  FakeArena second(arena_dir_, job_, 1, 4 << 20);
  ckpt::Manifest m = second.Save(4, 0x44);
  struct stat after {};
  ASSERT_EQ(stat(second.path().c_str(), &after), 0);
  ASSERT_NE(before.st_ino, after.st_ino);
  Keep({1});
  auto c = MustOpen(p, "arena/4/1");
  ExpectCopy(*c, m, 0x44);
  EXPECT_EQ(p.mapped_arenas(), 1u);
  // The old region keeps its own (unlinked) mapping: its bytes did not change under it.
  EXPECT_EQ(a->data()[0], 0x33);
  EXPECT_TRUE(a->StillValid());
}

TEST_F(CopyProviderTest, ARemovedArenaIsUnmappedOnceItsReadersAreDone) {
  FakeArena arena(arena_dir_, job_, 5, 1 << 20);
  arena.Save(7, 0x77);
  Keep({5});
  CopyProvider p = Provider();
  auto region = MustOpen(p, "arena/7/5");
  p.Prune();
  EXPECT_EQ(p.mapped_arenas(), 1u) << "the file is still there";
  ASSERT_EQ(unlink(arena.path().c_str()), 0);  // the job's cleanup removes the arena
  p.Prune();
  EXPECT_EQ(p.mapped_arenas(), 0u) << "a removed arena's pages must not stay pinned by the worker";
  EXPECT_EQ(region->data()[0], 0x77) << "a reader in progress keeps its mapping";
}

// The keeper's arenas are mapped ahead of any request, and the fast-path hooks hear of each
// mapping once — where a verbs server registers it — and again when it is gone.
TEST_F(CopyProviderTest, WarmMapsTheKeepersArenasAheadAndTellsTheHooksOnce) {
  auto arena = std::make_unique<FakeArena>(arena_dir_, job_, 3, 1 << 20);
  arena->Save(1, 0x31);
  FakeArena other(arena_dir_, job_, 4, 1 << 20);  // not this node's
  other.Save(1, 0x41);
  Keep({3});
  CopyProvider p = Provider();
  p.Warm();
  EXPECT_EQ(p.mapped_arenas(), 1u);
  ASSERT_EQ(mapped_.size(), 1u);
  p.Warm();
  auto region = MustOpen(p, "arena/1/3");
  EXPECT_EQ(mapped_.size(), 1u) << "mapped (and registered) once, not per request";
  EXPECT_EQ(mapped_[0].first, region->data());
  EXPECT_GE(mapped_[0].second, region->size());
  EXPECT_TRUE(unmapped_.empty());

  const std::string path = arena->path();
  arena.reset();
  ASSERT_EQ(unlink(path.c_str()), 0);
  p.Prune();
  EXPECT_TRUE(unmapped_.empty()) << "a reader still holds it";
  region.reset();
  ASSERT_EQ(unmapped_.size(), 1u);
  EXPECT_EQ(unmapped_[0], mapped_[0]);
}

TEST_F(CopyProviderTest, ServesALocalTierCopy) {
  FakeArena arena(arena_dir_, job_, 6, (3 << 20) + 100);
  ckpt::Manifest m = arena.Save(12, 0x66);
  ckpt::PersistStats stats;
  ASSERT_TRUE(ckpt::PersistCopy(ckpt::TierKind::kLocal, local_, m, arena.committed_data(), [] { return true; },
                                &stats).ok());
  arena.Save(13, 0x67);  // the arena moved on; the local tier still holds step 12
  CopyProvider p = Provider(local_);
  auto region = MustOpen(p, "local/12/6");
  ASSERT_NE(region, nullptr);
  ExpectCopy(*region, m, 0x66);

  std::shared_ptr<const rdma::Region> none;
  EXPECT_EQ(Provider("").Open("local/12/6", &none).code(), StatusCode::kNotFound);
  // A data file cut short (a damaged disk) is not served.
  std::filesystem::resize_file(ckpt::DataPath(local_, job_, {12, 6}), 4096);
  Status s = p.Open("local/12/6", &none);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("shorter"), std::string_view::npos) << s.ToString();
  // A manifest moved under another copy's name is not served under that name.
  std::filesystem::create_directories(ckpt::StepDir(local_, job_, 14));
  std::filesystem::copy_file(ckpt::ManifestPath(local_, job_, {12, 6}), ckpt::ManifestPath(local_, job_, {14, 6}));
  std::filesystem::copy_file(ckpt::DataPath(local_, job_, {12, 6}), ckpt::DataPath(local_, job_, {14, 6}));
  EXPECT_EQ(p.Open("local/14/6", &none).code(), StatusCode::kNotFound);
}

// A local-tier copy is mapped per open, and a fast path registers that mapping at its first
// offer: the hooks must hear when it is unmapped, or the registration pins the pages forever and
// a later mapping at the same address is served from the stale one.
TEST_F(CopyProviderTest, ALocalCopysMappingIsForgottenWhenItsLastReaderLetsGo) {
  FakeArena arena(arena_dir_, job_, 6, (2 << 20) + 100);
  ckpt::Manifest m = arena.Save(12, 0x66);
  ckpt::PersistStats stats;
  ASSERT_TRUE(ckpt::PersistCopy(ckpt::TierKind::kLocal, local_, m, arena.committed_data(), [] { return true; },
                                &stats).ok());
  CopyProvider p = Provider(local_);
  auto region = MustOpen(p, "local/12/6");
  ASSERT_NE(region, nullptr);
  const uint8_t* data = region->data();
  const uint64_t size = region->size();
  EXPECT_TRUE(unmapped_.empty()) << "still being read";
  region.reset();
  ASSERT_EQ(unmapped_.size(), 1u) << "the mapping went away without a word to the fast path";
  EXPECT_EQ(unmapped_[0].first, data);
  EXPECT_EQ(unmapped_[0].second, size);
}

// ---- FT_LISTEN ------------------------------------------------------------------------------

TEST(ListenAddressTest, TheSettingWinsEvenEveryInterface) {
  ListenChoice c = ChooseListenAddress("10.9.8.7", "h", {"10.0.0.5"});
  EXPECT_EQ(c.address, "10.9.8.7");
  EXPECT_EQ(c.warning, "");
  c = ChooseListenAddress("0.0.0.0", "h", {"10.0.0.5"});
  EXPECT_EQ(c.address, "0.0.0.0");
  EXPECT_EQ(c.warning, "");
}

TEST(ListenAddressTest, TheHostsReachableAddressIPv4First) {
  EXPECT_EQ(ChooseListenAddress("", "h", {"127.0.1.1", "::1", "fe80::1", "2001:db8::5", "169.254.1.1",
                                          "0.0.0.0", "10.0.0.5", "10.0.0.6"}).address,
            "10.0.0.5");
  ListenChoice v6 = ChooseListenAddress("", "h", {"::1", "2001:db8::5"});
  EXPECT_EQ(v6.address, "2001:db8::5");
  EXPECT_EQ(v6.warning, "");
}

TEST(ListenAddressTest, NothingReachableMeansLoopbackWithAWarning) {
  for (const std::vector<std::string>& resolved :
       {std::vector<std::string>{}, std::vector<std::string>{"127.0.1.1", "::1", "0.0.0.0", "::"}}) {
    ListenChoice c = ChooseListenAddress("", "box", resolved);
    EXPECT_EQ(c.address, "127.0.0.1");
    EXPECT_NE(c.warning.find("set FT_LISTEN"), std::string::npos) << c.warning;
    EXPECT_NE(c.warning.find("'box'"), std::string::npos) << c.warning;
  }
}

TEST(ListenAddressTest, ResolvesLocalhostNumerically) {
  std::vector<std::string> a = ResolveHost("localhost");
  ASSERT_FALSE(a.empty());
  for (const std::string& s : a) EXPECT_TRUE(s == "127.0.0.1" || s == "::1") << s;
  EXPECT_TRUE(ResolveHost("").empty());
}

}  // namespace
}  // namespace ft::worker

// The engine against real peer processes (transfer_peer) that die, freeze or lie in the middle
// of a pull: another replica finishes it, the bytes are verified, the result says what happened.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "transfer_engine/tests/peer_process.h"
#include "transfer_engine/tests/test_regions.h"
#include "transfer_engine/transfer.h"

namespace ft::rdma {
namespace {

using testing::ExpectedBytes;
using testing::Pattern;
using testing::PeerProcess;

constexpr char kSecret[] = "e2e5ec4b1de2e5ec4b1de2e5ec4b1de2e5ec4b1de2e5ec4b1de2e5ec4b1d0000";
constexpr uint64_t kSeed = 42;
constexpr uint64_t kBytes = 64ull << 20;
constexpr uint64_t kChunk = 4ull << 20;
constexpr uint64_t kChunks = kBytes / kChunk;

std::vector<std::string> PeerArgs(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--secret", kSecret, "--seed", std::to_string(kSeed),
                                   "--bytes", std::to_string(kBytes), "--name", "arena/5/4"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

bool AnyNote(const PullResult& result, std::initializer_list<std::string_view> parts) {
  return std::any_of(result.notes.begin(), result.notes.end(), [&](const std::string& note) {
    return std::all_of(parts.begin(), parts.end(),
                       [&](std::string_view p) { return note.find(p) != std::string::npos; });
  });
}

std::string Notes(const PullResult& result) {
  std::string all;
  for (const std::string& n : result.notes) all += n + "\n";
  return all;
}

class PeerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    expected_.bytes = Pattern(kSeed, kBytes);
    expected_.chunk_bytes = kChunk;
    options_.secret = kSecret;
    options_.connections = 4;
    options_.piece_bytes = 1ull << 20;
    options_.io_timeout = std::chrono::milliseconds(1000);
  }

  std::unique_ptr<PeerProcess> Start(std::vector<std::string> extra = {}) {
    auto peer = std::make_unique<PeerProcess>(FT_TRANSFER_PEER, PeerArgs(std::move(extra)));
    EXPECT_NE(peer->port(), 0) << "transfer_peer did not start";
    return peer;
  }

  PullRequest Request(std::initializer_list<std::pair<std::string, const PeerProcess*>> sources) {
    dest_.assign(kBytes, 0);
    PullRequest request;
    for (const auto& [node, peer] : sources)
      request.sources.push_back({{node, "127.0.0.1", peer->port()}, "arena/5/4"});
    request.dest = dest_.data();
    request.bytes = kBytes;
    request.chunk_bytes = kChunk;
    request.verify = expected_.Verifier();
    return request;
  }

  ExpectedBytes expected_;
  PullOptions options_;
  std::vector<uint8_t> dest_;
};

TEST_F(PeerE2eTest, PeerKilledMidPullAnotherReplicaFinishesIt) {
  auto dying = Start({"--kill-at-check", "9"});  // inside its 5th piece
  auto healthy = Start();
  PullResult result;
  Status s = Pull(options_, Request({{"node0", dying.get()}, {"node1", healthy.get()}}), &result);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Notes(result);
  EXPECT_TRUE(dest_ == expected_.bytes);
  int status = 0;
  ASSERT_TRUE(dying->Exited(&status)) << "the peer should have killed itself mid-pull";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_GE(result.refetched_chunks, 1u);
  EXPECT_GT(result.bytes_by_source["node1/tcp"], 0u);
  EXPECT_TRUE(AnyNote(result, {"node0/tcp", "gave up"})) << Notes(result);
  EXPECT_EQ(result.fallback_chunks, 0u);
}

TEST_F(PeerE2eTest, CorruptedChunkIsRefetchedFromAnotherReplica) {
  auto liar = Start({"--corrupt-offset", std::to_string(5 * kChunk + 12345)});
  auto healthy = Start();
  PullResult result;
  Status s = Pull(options_, Request({{"node0", liar.get()}, {"node1", healthy.get()}}), &result);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Notes(result);
  EXPECT_TRUE(dest_ == expected_.bytes);
  EXPECT_EQ(result.refetched_chunks, 1u);
  EXPECT_EQ(result.bytes_by_source["node0/tcp"], kBytes);
  EXPECT_EQ(result.bytes_by_source["node1/tcp"], kChunk);  // only the bad chunk again
  EXPECT_TRUE(AnyNote(result, {"node0/tcp", "chunk 5 failed verification"})) << Notes(result);
  EXPECT_EQ(*expected_.calls, static_cast<int>(kChunks) + 1);
}

TEST_F(PeerE2eTest, SlowPeerIsGivenUpAfterTheIoTimeout) {
  auto frozen = Start({"--stop-at-check", "7"});  // freezes inside its 4th piece
  auto healthy = Start();
  auto start = std::chrono::steady_clock::now();
  PullResult result;
  Status s = Pull(options_, Request({{"node0", frozen.get()}, {"node1", healthy.get()}}), &result);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Notes(result);
  EXPECT_TRUE(dest_ == expected_.bytes);
  EXPECT_EQ(frozen->State(), 'T') << "the peer should be stopped, not dead";
  EXPECT_TRUE(AnyNote(result, {"node0/tcp", "I/O timeout"})) << Notes(result);
  EXPECT_GE(result.refetched_chunks, 1u);
  EXPECT_GT(result.bytes_by_source["node1/tcp"], 0u);
  // Given up after one io_timeout of silence, not hung and not at once.
  EXPECT_GE(seconds, 0.9);
  EXPECT_LT(seconds, 30);
}

// Never silent for an io_timeout, but far below the floor: at most 1 MiB per 200 ms per I/O
// thread, while a healthy loopback peer serves hundreds of MiB/s. Given up after a window; the
// healthy replica finishes the pull.
TEST_F(PeerE2eTest, TricklingPeerIsGivenUpBelowTheRateFloor) {
  auto trickling = Start({"--pause-per-check-ms", "100"});
  auto healthy = Start();
  options_.min_bytes_per_second = 16ull << 20;
  PullResult result;
  Status s = Pull(options_, Request({{"node0", trickling.get()}, {"node1", healthy.get()}}), &result);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Notes(result);
  EXPECT_TRUE(dest_ == expected_.bytes);
  EXPECT_TRUE(AnyNote(result, {"node0/tcp", "below the floor"})) << Notes(result);
  EXPECT_FALSE(AnyNote(result, {"node0/tcp", "I/O timeout"})) << "trickling, not silent: " << Notes(result);
  EXPECT_GT(result.bytes_by_source["node1/tcp"], 0u);
  EXPECT_LT(result.bytes_by_source["node0/tcp"], kBytes / 2) << "given up after one window";
}

TEST_F(PeerE2eTest, AllSourcesFailThenTheFallbackIsUsed) {
  auto dying = Start({"--kill-at-check", "1"});
  auto frozen = Start({"--stop-at-check", "1"});
  PullRequest request = Request({{"node0", dying.get()}, {"node1", frozen.get()}});
  uint64_t fallback_bytes = 0;
  request.fallback = [&](uint64_t offset, uint64_t len, uint8_t* out) {
    std::memcpy(out, expected_.bytes.data() + offset, len);
    fallback_bytes += len;
    return Status::Ok();
  };
  PullResult result;
  Status s = Pull(options_, request, &result);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Notes(result);
  EXPECT_TRUE(dest_ == expected_.bytes);
  EXPECT_EQ(result.fallback_chunks, kChunks);
  EXPECT_EQ(fallback_bytes, kBytes);
  EXPECT_TRUE(AnyNote(result, {"node0/tcp"})) << Notes(result);
  EXPECT_TRUE(AnyNote(result, {"node1/tcp"})) << Notes(result);
}

TEST_F(PeerE2eTest, AllSourcesFailWithoutFallbackIsAnError) {
  auto dying = Start({"--kill-at-check", "3"});
  PullResult result;
  Status s = Pull(options_, Request({{"node0", dying.get()}}), &result);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("chunks not delivered"), std::string_view::npos) << s.ToString();
  EXPECT_TRUE(AnyNote(result, {"node0/tcp", "gave up"})) << Notes(result);
}

}  // namespace
}  // namespace ft::rdma

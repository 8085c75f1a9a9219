// The engine over real sockets on loopback, server and client in one process: bytes identical
// with 1 and 4 connections, Stat, authentication both ways, region errors, fallback.
#include <gtest/gtest.h>

#include <thread>

#include "tests/util/log_capture.h"
#include "transfer_engine/tests/settled_stats.h"
#include "transfer_engine/tests/test_regions.h"
#include "transfer_engine/transfer.h"

namespace ft::rdma {
namespace {

using testing::ExpectedBytes;
using testing::MapProvider;
using testing::MemoryRegion;
using testing::Pattern;

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

class LoopbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    expected_.bytes = Pattern(7, kBytes);
    expected_.chunk_bytes = kChunk;
    region_ = std::make_shared<MemoryRegion>(expected_.bytes, "manifest-7");
    provider_.Add("arena/10/3", region_);
    ServerOptions options;
    options.listen_address = "127.0.0.1";
    options.secret = kSecret;
    options.provider = &provider_;
    server_ = std::make_unique<Server>(options);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
  }

  Peer ThePeer() const { return {"node0", "127.0.0.1", server_->port()}; }

  PullRequest Request(std::vector<uint8_t>* dest) {
    dest->assign(kBytes, 0);
    PullRequest request;
    request.sources = {{ThePeer(), "arena/10/3"}};
    request.dest = dest->data();
    request.bytes = kBytes;
    request.chunk_bytes = kChunk;
    request.verify = expected_.Verifier();
    return request;
  }

  static constexpr uint64_t kBytes = (12ull << 20) + 4097;  // a ragged last chunk and piece
  static constexpr uint64_t kChunk = 3ull << 20;
  ExpectedBytes expected_;
  std::shared_ptr<MemoryRegion> region_;
  MapProvider provider_;
  std::unique_ptr<Server> server_;
};

class LoopbackConnectionsTest : public LoopbackTest, public ::testing::WithParamInterface<int> {};

TEST_P(LoopbackConnectionsTest, PullsTheRegionBytesIdentical) {
  PullOptions options;
  options.secret = kSecret;
  options.connections = GetParam();
  options.piece_bytes = 1ull << 20;
  std::vector<uint8_t> dest;
  PullRequest request = Request(&dest);
  PullResult result;
  Status s = Pull(options, request, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest, expected_.bytes);
  EXPECT_EQ(result.bytes, kBytes);
  EXPECT_EQ(*expected_.calls, 5);  // every chunk verified exactly once
  EXPECT_EQ(result.bytes_by_source["node0/tcp"], kBytes);
  EXPECT_EQ(result.refetched_chunks, 0u);
  EXPECT_EQ(result.fallback_chunks, 0u);
  EXPECT_GE(result.first_byte_ms, 0);
  ServerStats stats = testing::StatsOnceSent(*server_, kBytes);
  EXPECT_EQ(stats.bytes_sent, kBytes);
  EXPECT_EQ(stats.connections, static_cast<uint64_t>(GetParam()));
  EXPECT_EQ(stats.auth_refused, 0u);
  EXPECT_EQ(stats.reads, 13u);  // 3 pieces per 3 MiB chunk, 1 for the ragged last chunk
}

INSTANTIATE_TEST_SUITE_P(Connections, LoopbackConnectionsTest, ::testing::Values(1, 4));

// A worker serves every rank of a replacement node at once: concurrent pulls of one region, each
// over several connections, all land identical bytes.
TEST_F(LoopbackTest, ConcurrentPullsOfOneRegionAllLandIdenticalBytes) {
  constexpr int kPulls = 4;
  std::vector<std::vector<uint8_t>> dests(kPulls);
  std::vector<Status> statuses(kPulls);
  std::vector<std::thread> threads;
  for (int i = 0; i < kPulls; ++i) {
    threads.emplace_back([&, i] {
      PullOptions options;
      options.secret = kSecret;
      options.connections = 3;
      options.piece_bytes = 512 << 10;
      dests[i].assign(kBytes, 0);
      PullRequest request = Request(&dests[i]);
      PullResult result;
      statuses[i] = Pull(options, request, &result);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kPulls; ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].ToString();
    EXPECT_TRUE(dests[i] == expected_.bytes) << i;
  }
  ServerStats stats = testing::StatsOnceSent(*server_, kPulls * kBytes);
  EXPECT_EQ(stats.bytes_sent, kPulls * kBytes);
  EXPECT_EQ(stats.connections, static_cast<uint64_t>(kPulls * 3));
}

TEST_F(LoopbackTest, StatReturnsSizeAndMetaOnly) {
  PullOptions options;
  options.secret = kSecret;
  RegionInfo info;
  Status s = Stat(options, ThePeer(), "arena/10/3", &info);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(info.size, kBytes);
  EXPECT_EQ(info.meta, "manifest-7");
  EXPECT_EQ(server_->stats().bytes_sent, 0u);
}

TEST_F(LoopbackTest, UnknownRegionIsNotFound) {
  PullOptions options;
  options.secret = kSecret;
  RegionInfo info;
  Status s = Stat(options, ThePeer(), "arena/11/3", &info);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
}

TEST_F(LoopbackTest, WrongSecretIsRefusedLoggedOnceAndSeesNothing) {
  test_util::LogCapture log;
  PullOptions options;
  options.secret = std::string(64, '9');  // well formed, not the job's
  RegionInfo info;
  info.size = 99;
  Status s = Stat(options, ThePeer(), "arena/10/3", &info);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("refused"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(info.size, 99u);
  std::vector<uint8_t> dest;
  PullRequest request = Request(&dest);
  PullResult result;
  s = Pull(options, request, &result);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(*expected_.calls, 0);
  ServerStats stats = server_->stats();
  EXPECT_EQ(stats.auth_refused, 2u);
  EXPECT_EQ(stats.bytes_sent, 0u);
  EXPECT_EQ(stats.reads, 0u);
  // Logged once for the address, not once per attempt.
  EXPECT_EQ(log.Count({"refused transfer peer 127.0.0.1", "wrong secret"}), 1u) << log.All();
}

TEST_F(LoopbackTest, EmptySecretOrAddressIsRefusedAtStart) {
  ServerOptions options;
  options.listen_address = "127.0.0.1";
  options.provider = &provider_;
  EXPECT_EQ(Server(options).Start().code(), StatusCode::kInvalidArgument);
  options.secret = kSecret;
  options.listen_address = "";
  Status s = Server(options).Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("FT_LISTEN"), std::string_view::npos) << s.ToString();
}

TEST_F(LoopbackTest, AllSourcesFailThenFallbackFillsEveryChunk) {
  PullOptions options;
  options.secret = kSecret;
  options.connect_timeout = std::chrono::milliseconds(500);
  std::vector<uint8_t> dest;
  PullRequest request = Request(&dest);
  request.sources = {{ThePeer(), "arena/99/3"}, {{"node9", "127.0.0.1", 1}, "arena/10/3"}};
  int fallback_calls = 0;
  request.fallback = [&](uint64_t offset, uint64_t len, uint8_t* out) {
    ++fallback_calls;
    std::memcpy(out, expected_.bytes.data() + offset, len);
    return Status::Ok();
  };
  PullResult result;
  Status s = Pull(options, request, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest, expected_.bytes);
  EXPECT_EQ(fallback_calls, 5);
  EXPECT_EQ(result.fallback_chunks, 5u);
  EXPECT_EQ(result.bytes_by_source["fallback"], kBytes);
  EXPECT_EQ(result.notes.size(), 2u);
}

// Replicas are only interchangeable if they hold the same copy: a source whose size or manifest
// differs from the first one opened is skipped, not mixed in.
TEST_F(LoopbackTest, SourceWithAnotherSizeOrManifestIsSkipped) {
  std::vector<uint8_t> bad = expected_.bytes;
  bad[kChunk + 5] ^= 1;  // chunk 1 fails verification on the first source
  provider_.Add("bad", std::make_shared<MemoryRegion>(bad, "manifest-7"));
  provider_.Add("other-manifest", std::make_shared<MemoryRegion>(expected_.bytes, "manifest-8"));
  std::vector<uint8_t> shorter(expected_.bytes.begin(), expected_.bytes.end() - 1);
  provider_.Add("other-size", std::make_shared<MemoryRegion>(shorter, "manifest-7"));
  PullOptions options;
  options.secret = kSecret;
  std::vector<uint8_t> dest;
  PullRequest request = Request(&dest);
  request.sources = {{ThePeer(), "bad"},
                     {ThePeer(), "other-manifest"},
                     {ThePeer(), "other-size"},
                     {ThePeer(), "arena/10/3"}};
  PullResult result;
  Status s = Pull(options, request, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest, expected_.bytes);
  EXPECT_EQ(result.refetched_chunks, 1u);
  ASSERT_EQ(result.notes.size(), 3u);
  EXPECT_NE(result.notes[0].find("chunk 1 failed verification"), std::string::npos) << result.notes[0];
  EXPECT_NE(result.notes[1].find("different manifest"), std::string::npos) << result.notes[1];
  EXPECT_NE(result.notes[2].find("not the"), std::string::npos) << result.notes[2];
}

TEST_F(LoopbackTest, WithoutFallbackAFailedPullSaysWhy) {
  PullOptions options;
  options.secret = kSecret;
  std::vector<uint8_t> dest;
  PullRequest request = Request(&dest);
  request.sources = {{ThePeer(), "arena/99/3"}};
  PullResult result;
  Status s = Pull(options, request, &result);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("5 of 5 chunks"), std::string_view::npos) << s.ToString();
}

}  // namespace
}  // namespace ft::rdma

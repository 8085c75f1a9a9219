// The verbs fast path inside the real engine: a Server and a Pull on loopback, the server's and
// the client's hooks on the fake NIC. Without faults every byte moves by RDMA READ and none
// over TCP; with an error completion the path ends and its remaining pieces finish over TCP,
// every chunk verified.
#include <gtest/gtest.h>

#include <algorithm>

#include "transfer_engine/tests/settled_stats.h"
#include "transfer_engine/tests/test_regions.h"
#include "transfer_engine/transfer.h"
#include "transfer_engine/verbs/tests/fake_verbs.h"
#include "transfer_engine/verbs/tests/verbs_test_util.h"

namespace ft::rdma::testing {
namespace {

constexpr char kSecret[] = "fa11bacfa11bacfa11bacfa11bacfa11bacfa11bacfa11bacfa11bacfa11bac0";
constexpr uint64_t kBytes = (10ull << 20) + 4097;
constexpr uint64_t kChunk = 2ull << 20;
constexpr int kChunks = 6;

class verbs_fallback : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pair_.Open(fake_.api()).ok());
    expected_.bytes = Pattern(21, kBytes);
    expected_.chunk_bytes = kChunk;
    provider_.Add("arena/3/1", std::make_shared<MemoryRegion>(expected_.bytes, "manifest"));
    ServerOptions options;
    options.listen_address = "127.0.0.1";
    options.secret = kSecret;
    options.provider = &provider_;
    options.fast_path = pair_.server.get();
    server_ = std::make_unique<Server>(options);
    ASSERT_TRUE(server_->Start().ok());
  }

  Status PullIt(std::vector<uint8_t>* dest, PullResult* result) {
    dest->assign(kBytes, 0);
    PullOptions options;
    options.secret = kSecret;
    options.piece_bytes = 1ull << 20;
    options.fast_path = pair_.client.get();
    PullRequest request;
    request.sources = {{{"node0", "127.0.0.1", server_->port()}, "arena/3/1"}};
    request.dest = dest->data();
    request.bytes = kBytes;
    request.chunk_bytes = kChunk;
    request.verify = expected_.Verifier();
    return Pull(options, request, result);
  }

  FakeVerbs fake_;
  VerbsPair pair_;
  ExpectedBytes expected_;
  MapProvider provider_;
  std::unique_ptr<Server> server_;
};

std::string Notes(const PullResult& result) {
  std::string all;
  for (const std::string& n : result.notes) all += n + "\n";
  return all;
}

TEST_F(verbs_fallback, WithoutFaultsEveryByteMovesByRdmaRead) {
  std::vector<uint8_t> dest;
  PullResult result;
  Status s = PullIt(&dest, &result);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Notes(result);
  EXPECT_EQ(dest, expected_.bytes);
  EXPECT_EQ(result.bytes_by_source["node0/verbs"], kBytes) << Notes(result);
  EXPECT_EQ(result.bytes_by_source["node0/tcp"], 0u);
  EXPECT_EQ(server_->stats().bytes_sent, 0u) << "no data over TCP";
  EXPECT_EQ(*expected_.calls, kChunks);
  EXPECT_EQ(fake_.reads_executed(), 11u) << "1 MiB reads";
}

TEST_F(verbs_fallback, ErrorCompletionFinishesOverTcpWithEveryChunkVerified) {
  fake_.FailNthRead(4, IBV_WC_REM_ACCESS_ERR);
  std::vector<uint8_t> dest;
  PullResult result;
  Status s = PullIt(&dest, &result);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Notes(result);
  EXPECT_EQ(dest, expected_.bytes);
  const uint64_t verbs = result.bytes_by_source["node0/verbs"], tcp = result.bytes_by_source["node0/tcp"];
  EXPECT_GE(verbs, 3ull << 20) << "the reads before the failure count";
  EXPECT_GT(tcp, 0u);
  EXPECT_EQ(verbs + tcp, kBytes) << "each piece delivered once, by one path";
  EXPECT_EQ(StatsOnceSent(*server_, tcp).bytes_sent, tcp);
  EXPECT_EQ(*expected_.calls, kChunks) << "every chunk verified once, whichever path filled it";
  EXPECT_EQ(result.refetched_chunks, 0u);
  std::string notes = Notes(result);
  EXPECT_NE(notes.find("verbs path failed"), std::string::npos) << notes;
  EXPECT_NE(notes.find("remote access error"), std::string::npos) << notes;
}

TEST_F(verbs_fallback, QpErrorMidPullFinishesOverTcp) {
  fake_.BreakQpAfterReads(2);
  std::vector<uint8_t> dest;
  PullResult result;
  Status s = PullIt(&dest, &result);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << Notes(result);
  EXPECT_EQ(dest, expected_.bytes);
  EXPECT_GT(result.bytes_by_source["node0/tcp"], 0u);
  EXPECT_EQ(result.bytes_by_source["node0/verbs"] + result.bytes_by_source["node0/tcp"], kBytes);
  EXPECT_EQ(*expected_.calls, kChunks);
}

}  // namespace
}  // namespace ft::rdma::testing

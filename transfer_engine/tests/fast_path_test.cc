// The fast-path hooks (transfer_engine/piece_path.h) as the engine drives them, with a tiny in-test
// transport standing in for verbs: the server's offer travels in the open reply, the client's
// connect request and the server's reply over the control connection, the path lands some
// pieces by memcpy and hands the others back, and the engine fetches those over TCP.
#include <gtest/gtest.h>

#include <mutex>

#include "transfer_engine/tests/settled_stats.h"
#include "transfer_engine/tests/test_regions.h"
#include "transfer_engine/transfer.h"

namespace ft::rdma {
namespace {

using testing::ExpectedBytes;
using testing::MapProvider;
using testing::MemoryRegion;
using testing::Pattern;

constexpr char kSecret[] = "fa57fa57fa57fa57fa57fa57fa57fa57fa57fa57fa57fa57fa57fa57fa57fa57";
constexpr uint64_t kBytes = (8ull << 20) + 300;
constexpr uint64_t kChunk = 1ull << 20;

// "Registers" a region by handing out its address: only meaningful in one process, which is
// exactly what an in-test stand-in for RDMA READ needs.
class MemcpyServer : public FastPathServer {
 public:
  const char* kind() const override { return "memcpy"; }
  std::string Offer(const Region& region) override {
    offers++;
    return "memcpy:" + std::to_string(reinterpret_cast<uintptr_t>(region.data()));
  }
  Status Accept(const Region& region, std::string_view request, std::string* reply) override {
    if (request != "connect-please") return Status::InvalidArgument("bad request blob");
    accepts++;
    *reply = "accepted:" + std::to_string(region.size());
    return Status::Ok();
  }
  int offers = 0, accepts = 0;
};

// Lands pieces with an even index (up to `land_limit` of them), then reports a failure and
// hands back every piece it did not land: an error completion halfway through.
class MemcpyPath : public PiecePath {
 public:
  MemcpyPath(const uint8_t* source, uint8_t* dest, size_t land_limit)
      : source_(source), dest_(dest), land_limit_(land_limit) {}
  const char* kind() const override { return "memcpy"; }
  Status Fetch(const std::vector<Piece>& pieces, const std::function<void(size_t)>& landed,
               std::vector<size_t>* left) override {
    size_t done = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (i % 2 == 0 && done < land_limit_) {
        std::memcpy(dest_ + pieces[i].offset, source_ + pieces[i].offset, pieces[i].len);
        landed(i);
        ++done;
      } else {
        left->push_back(i);
      }
    }
    if (left->empty()) return Status::Ok();
    return Status::IoError("work completion error (transport retry exceeded)");
  }

 private:
  const uint8_t* source_;
  uint8_t* dest_;
  size_t land_limit_;
};

class MemcpyClient : public FastPathClient {
 public:
  explicit MemcpyClient(size_t land_limit) : land_limit_(land_limit) {}
  const char* kind() const override { return "memcpy"; }
  Status Connect(std::string_view offer, uint8_t* dest, uint64_t bytes, const Exchange& exchange,
                 std::unique_ptr<PiecePath>* out) override {
    if (offer.rfind("memcpy:", 0) != 0) return Status::Unavailable("not a memcpy offer");
    std::string reply;
    FT_RETURN_IF_ERROR(exchange("connect-please", &reply));
    if (reply != "accepted:" + std::to_string(bytes)) return Status::Corrupt("unexpected reply " + reply);
    auto* source = reinterpret_cast<const uint8_t*>(std::stoull(std::string(offer.substr(7))));
    *out = std::make_unique<MemcpyPath>(source, dest, land_limit_);
    connects++;
    return Status::Ok();
  }
  int connects = 0;

 private:
  size_t land_limit_;
};

class FastPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    expected_.bytes = Pattern(11, kBytes);
    expected_.chunk_bytes = kChunk;
    provider_.Add("arena/3/1", std::make_shared<MemoryRegion>(expected_.bytes, "m"));
    ServerOptions options;
    options.listen_address = "127.0.0.1";
    options.secret = kSecret;
    options.provider = &provider_;
    options.fast_path = &fast_server_;
    server_ = std::make_unique<Server>(options);
    ASSERT_TRUE(server_->Start().ok());
  }
  PullRequest Request() {
    dest_.assign(kBytes, 0);
    PullRequest request;
    request.sources = {{{"node0", "127.0.0.1", server_->port()}, "arena/3/1"}};
    request.dest = dest_.data();
    request.bytes = kBytes;
    request.chunk_bytes = kChunk;
    request.verify = expected_.Verifier();
    return request;
  }

  ExpectedBytes expected_;
  MapProvider provider_;
  MemcpyServer fast_server_;
  std::unique_ptr<Server> server_;
  std::vector<uint8_t> dest_;
};

TEST_F(FastPathTest, PiecesTheFastPathHandsBackContinueOverTcp) {
  MemcpyClient client(/*land_limit=*/3);
  PullOptions options;
  options.secret = kSecret;
  options.piece_bytes = 512 << 10;  // 2 pieces per chunk, 19 pieces
  options.fast_path = &client;
  PullResult result;
  Status s = Pull(options, Request(), &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest_, expected_.bytes);
  EXPECT_EQ(fast_server_.offers, 1);  // asked for on the control connection only
  EXPECT_EQ(fast_server_.accepts, 1);
  EXPECT_EQ(client.connects, 1);
  EXPECT_EQ(result.bytes_by_source["node0/memcpy"], 3u * (512 << 10));
  EXPECT_EQ(result.bytes_by_source["node0/tcp"], kBytes - 3u * (512 << 10));
  EXPECT_EQ(testing::StatsOnceSent(*server_, kBytes - 3u * (512 << 10)).bytes_sent,
            kBytes - 3u * (512 << 10));
  EXPECT_EQ(*expected_.calls, 9);  // each chunk verified once, whichever path landed its pieces
  EXPECT_EQ(result.refetched_chunks, 0u);
  ASSERT_EQ(result.notes.size(), 1u);
  EXPECT_NE(result.notes[0].find("memcpy path failed"), std::string::npos) << result.notes[0];
}

TEST_F(FastPathTest, APathThatLandsEverythingLeavesNothingToTcp) {
  MemcpyClient client(/*land_limit=*/1000);
  PullOptions options;
  options.secret = kSecret;
  options.piece_bytes = 512 << 10;
  options.fast_path = &client;
  // Odd pieces are always handed back by this path; with one piece per chunk-sized piece
  // every second chunk still goes over TCP. Make every piece even: one piece only.
  options.piece_bytes = kBytes;
  PullRequest request = Request();
  request.chunk_bytes = kBytes;
  expected_.chunk_bytes = kBytes;
  PullResult result;
  Status s = Pull(options, request, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest_, expected_.bytes);
  EXPECT_EQ(result.bytes_by_source["node0/memcpy"], kBytes);
  EXPECT_EQ(result.bytes_by_source.count("node0/tcp"), 0u);
  EXPECT_EQ(server_->stats().bytes_sent, 0u);
}

TEST_F(FastPathTest, AClientWithoutTheFastPathUsesTcpAlone) {
  PullOptions options;
  options.secret = kSecret;
  PullResult result;
  Status s = Pull(options, Request(), &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest_, expected_.bytes);
  EXPECT_EQ(result.bytes_by_source["node0/tcp"], kBytes);
  EXPECT_EQ(fast_server_.accepts, 0);
}

}  // namespace
}  // namespace ft::rdma

// The server against peers that do not follow the script: unauthenticated, silent, lying about
// being a server, asking out of range, or sending garbage after authenticating. Also: where it
// listens, and a copy that changes under a reader.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <sys/resource.h>

#include <fstream>
#include <random>
#include <thread>

#include "tests/util/log_capture.h"
#include "transfer_engine/tests/raw_socket.h"
#include "transfer_engine/tests/test_regions.h"
#include "transfer_engine/transfer.h"

namespace ft::rdma {
namespace {

using testing::ExpectedBytes;
using testing::MapProvider;
using testing::MemoryRegion;
using testing::Pattern;
using testing::RawSocket;

constexpr char kSecret[] = "5e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e45e4e";
constexpr uint64_t kBytes = 1ull << 20;

// The next frame from the server, which must be an error frame, decoded into *out.
::testing::AssertionResult ReceiveError(RawSocket& raw, wire::Error* out) {
  wire::FrameHeader h;
  std::string payload;
  if (!raw.ReceiveFrame(&h, &payload)) return ::testing::AssertionFailure() << "no frame";
  if (h.type != wire::MessageType::kError) {
    return ::testing::AssertionFailure() << "a " << wire::MessageTypeName(h.type) << " frame, not an error";
  }
  Status s = wire::DecodeError(payload, out);
  if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
  return ::testing::AssertionSuccess();
}

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(std::chrono::milliseconds handshake_timeout = std::chrono::milliseconds(5000)) {
    expected_.bytes = Pattern(3, kBytes);
    expected_.chunk_bytes = 256 << 10;
    region_ = std::make_shared<MemoryRegion>(expected_.bytes, "manifest-3");
    provider_.Add("arena/10/3", region_);
    ServerOptions options;
    options.listen_address = "127.0.0.1";
    options.secret = kSecret;
    options.provider = &provider_;
    options.handshake_timeout = handshake_timeout;
    server_ = std::make_unique<Server>(options);
    ASSERT_TRUE(server_->Start().ok());
  }
  Peer ThePeer() const { return {"node0", "127.0.0.1", server_->port()}; }

  ExpectedBytes expected_;
  std::shared_ptr<MemoryRegion> region_;
  MapProvider provider_;
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, UnauthenticatedRequestGetsAuthRefusedAndNothingElse) {
  StartServer();
  test_util::LogCapture log;
  RawSocket raw(server_->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send(wire::EncodeOpen({0, "arena/10/3"})));
  bool eof = false;
  EXPECT_EQ(raw.ReceiveAll(&eof), wire::EncodeAuthRefused());
  EXPECT_TRUE(eof);
  EXPECT_EQ(server_->stats().auth_refused, 1u);
  EXPECT_EQ(log.Count({"refused transfer peer 127.0.0.1", "sent open before authenticating"}), 1u)
      << log.All();
}

TEST_F(ServerTest, WrongProofGetsAuthRefusedAndNothingElse) {
  StartServer();
  RawSocket raw(server_->port());
  wire::Hello hello{kProtocolVersion, {}};
  ASSERT_TRUE(raw.Send(wire::EncodeHello(hello)));
  wire::FrameHeader h;
  std::string payload;
  ASSERT_TRUE(raw.ReceiveFrame(&h, &payload));
  EXPECT_EQ(h.type, wire::MessageType::kChallenge);
  ASSERT_TRUE(raw.Send(wire::EncodeResponse({})));  // all-zero MAC
  bool eof = false;
  EXPECT_EQ(raw.ReceiveAll(&eof), wire::EncodeAuthRefused());
  EXPECT_TRUE(eof);
  EXPECT_EQ(server_->stats().auth_refused, 1u);
  EXPECT_EQ(server_->stats().bytes_sent, 0u);
}

// (A version-1 client is told in version 1's framing: WireVersionsServerTest.)
TEST_F(ServerTest, AnotherVersionIsToldWhichAndRefused) {
  StartServer();
  RawSocket raw(server_->port());
  std::string hello = wire::EncodeHello({9, {}});
  hello[4] = 9;  // the frame's version
  ASSERT_TRUE(raw.Send(hello));
  wire::Error error;
  ASSERT_TRUE(ReceiveError(raw, &error));
  EXPECT_EQ(error.code, wire::ErrorCode::kUnsupportedVersion);
  EXPECT_NE(error.text.find("version 9 is not supported (this side speaks version 2"),
            std::string::npos)
      << error.text;
  bool eof = false;
  EXPECT_EQ(raw.ReceiveAll(&eof), "");
  EXPECT_TRUE(eof);
  EXPECT_EQ(server_->stats().auth_refused, 1u);
}

TEST_F(ServerTest, SilentPeerIsRefusedAtTheHandshakeDeadline) {
  StartServer(std::chrono::milliseconds(200));
  test_util::LogCapture log;
  RawSocket raw(server_->port());
  auto start = std::chrono::steady_clock::now();
  bool eof = false;
  EXPECT_EQ(raw.ReceiveAll(&eof), wire::EncodeAuthRefused());
  EXPECT_TRUE(eof);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(server_->stats().auth_refused, 1u);
  EXPECT_EQ(log.Count({"refused transfer peer", "handshake deadline"}), 1u) << log.All();
}

TEST_F(ServerTest, RefusalsAreLoggedOncePerAddressButAllCounted) {
  StartServer();
  test_util::LogCapture log;
  for (int i = 0; i < 5; ++i) {
    RawSocket raw(server_->port());
    ASSERT_TRUE(raw.Send(wire::EncodeClose()));
    bool eof = false;
    raw.ReceiveAll(&eof);
  }
  EXPECT_EQ(server_->stats().auth_refused, 5u);
  EXPECT_EQ(log.Count({"refused transfer peer 127.0.0.1"}), 1u) << log.All();
}

// A process listening where a peer should be, without the secret, cannot feed the client: the
// client checks the server's proof before it asks for anything.
TEST_F(ServerTest, FakeServerWithoutTheSecretIsRefusedByTheClient) {
  testing::RawListener listener;
  ASSERT_TRUE(listener.listening());
  std::string after_response;
  std::thread fake([&] {
    std::unique_ptr<RawSocket> conn = listener.Accept();
    wire::FrameHeader h;
    std::string payload;
    if (!conn->ReceiveFrame(&h, &payload)) return;  // hello
    conn->Send(wire::EncodeChallenge({}));
    if (!conn->ReceiveFrame(&h, &payload)) return;  // response
    conn->Send(wire::EncodeAuthOk({}));             // a proof it cannot make
    bool eof = false;
    after_response = conn->ReceiveAll(&eof);
  });
  PullOptions options;
  options.secret = kSecret;
  RegionInfo info;
  Status s = Stat(options, {"fake", "127.0.0.1", listener.port()}, "arena/10/3", &info);
  fake.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("could not prove"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(after_response.find("arena"), std::string::npos) << "the client named a region to it";
}

// Bound to the address given and nothing else: the kernel's own table says so, and another
// address of this host does not answer.
TEST_F(ServerTest, ListensOnTheGivenAddressOnly) {
  StartServer();
  char wanted[32];
  std::snprintf(wanted, sizeof(wanted), "0100007F:%04X", server_->port());
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line;
  int listening = 0, anywhere = 0;
  char any[32];
  std::snprintf(any, sizeof(any), "00000000:%04X", server_->port());
  while (std::getline(tcp, line)) {
    if (line.find(" 0A ") == std::string::npos) continue;  // LISTEN
    if (line.find(wanted) != std::string::npos) ++listening;
    if (line.find(any) != std::string::npos) ++anywhere;
  }
  EXPECT_EQ(listening, 1);
  EXPECT_EQ(anywhere, 0);

  ifaddrs* addrs = nullptr;
  ASSERT_EQ(getifaddrs(&addrs), 0);
  for (ifaddrs* i = addrs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    sockaddr_in other = *reinterpret_cast<sockaddr_in*>(i->ifa_addr);
    if ((ntohl(other.sin_addr.s_addr) >> 24) == 127) continue;
    other.sin_port = htons(server_->port());
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&other), sizeof(other)), 0)
        << "reachable on " << inet_ntoa(other.sin_addr);
    close(fd);
  }
  freeifaddrs(addrs);
}

// A worker whose job secret changed restarts its server on the port its peers know
// (ftworker/transfer/transfer_service.cc): once Stop returned, that port is free again, also
// while a peer's connection was open when it stopped.
TEST_F(ServerTest, AStoppedServersPortIsFreeForTheNextOne) {
  StartServer();
  const uint16_t port = server_->port();
  RawSocket idle(port);  // a peer connected, not yet authenticated
  ASSERT_TRUE(idle.connected());
  server_->Stop();
  ServerOptions options;
  options.listen_address = "127.0.0.1";
  options.port = port;
  options.secret = kSecret;
  options.provider = &provider_;
  Server next(options);
  Status started = next.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  EXPECT_EQ(next.port(), port);
  RawSocket again(port);
  EXPECT_TRUE(again.connected());
  next.Stop();
}

TEST_F(ServerTest, ReadOutsideTheRegionIsAnErrorNotBytes) {
  StartServer();
  RawSocket raw(server_->port());
  ASSERT_TRUE(raw.Authenticate(kSecret));
  ASSERT_TRUE(raw.SendSealed(wire::EncodeOpen({0, "arena/10/3"})));
  wire::FrameHeader h;
  std::string payload;
  ASSERT_TRUE(raw.ReceiveFrame(&h, &payload));
  ASSERT_EQ(h.type, wire::MessageType::kOpenReply);
  ASSERT_TRUE(raw.SendSealed(wire::EncodeRead({0, kBytes - 10, 11, 5})));
  wire::Error error;
  ASSERT_TRUE(ReceiveError(raw, &error));
  EXPECT_EQ(error.code, wire::ErrorCode::kOutOfRange);
  EXPECT_EQ(error.tag, 5u);
  EXPECT_EQ(server_->stats().bytes_sent, 0u);
}

TEST_F(ServerTest, ServerMessagesFromAClientAreRefusedOnTheirHeader) {
  StartServer();
  RawSocket raw(server_->port());
  ASSERT_TRUE(raw.Authenticate(kSecret));
  // A data frame header announcing 64 MiB, and nothing after it: the server answers at once.
  uint8_t header[wire::kHeaderBytes];
  wire::EncodeHeader(wire::MessageType::kData,
                     static_cast<uint32_t>(wire::kDataHeaderBytes + wire::kMaxReadBytes), header);
  ASSERT_TRUE(raw.Send(std::string_view(reinterpret_cast<char*>(header), sizeof(header))));
  wire::Error error;
  ASSERT_TRUE(ReceiveError(raw, &error));
  EXPECT_EQ(error.code, wire::ErrorCode::kProtocol);
  EXPECT_NE(error.text.find("a client does not send data"), std::string::npos) << error.text;
}

// A copy overwritten by a newer save: the reader is told NotReady and goes to the next source.
TEST_F(ServerTest, ChangedCopyIsNotReadyAndTheNextSourceServes) {
  StartServer();
  auto stale = std::make_shared<MemoryRegion>(expected_.bytes, "manifest-3");
  stale->Invalidate();
  provider_.Add("arena/10/3-stale", stale);
  std::vector<uint8_t> dest(kBytes);
  PullRequest request;
  request.sources = {{ThePeer(), "arena/10/3-stale"}};
  request.dest = dest.data();
  request.bytes = kBytes;
  request.chunk_bytes = expected_.chunk_bytes;
  request.verify = expected_.Verifier();
  PullOptions options;
  options.secret = kSecret;
  PullResult result;
  Status s = Pull(options, request, &result);
  EXPECT_EQ(s.code(), StatusCode::kNotReady) << s.ToString();
  EXPECT_EQ(server_->stats().bytes_sent, 0u);

  request.sources.push_back({ThePeer(), "arena/10/3"});
  s = Pull(options, request, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest, expected_.bytes);
  EXPECT_EQ(result.refetched_chunks, 4u);
}

// Out of descriptors, accept fails at once and again at once: the server must pause, warn once
// and serve again when descriptors are back, not spin a core writing warnings.
TEST_F(ServerTest, OutOfDescriptorsPausesAcceptingAndRecovers) {
#if defined(__SANITIZE_ADDRESS__)
  // UBSan's vptr checks fail (an "invalid vptr" on valid objects) once the process has no
  // descriptor left; the sanitizer, not the server, is what breaks here.
  GTEST_SKIP() << "no descriptors left breaks the sanitizer runtime's own checks";
#endif
  StartServer();
  test_util::LogCapture log;
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  int open_fds = 0;
  for (int fd = 0; fd < 4096; ++fd) open_fds += fcntl(fd, F_GETFD) != -1 ? 1 : 0;
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(open_fds + 8);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<std::unique_ptr<RawSocket>> clients;
  for (int i = 0; i < 16; ++i) {
    auto raw = std::make_unique<RawSocket>(server_->port(), 200);
    if (raw->fd() < 0) break;  // this process's own limit reached too
    clients.push_back(std::move(raw));
  }
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // what a spinning acceptor would burn
  getrusage(RUSAGE_SELF, &after);
  auto cpu_ms = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000.0 +
           (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1000.0;
  };
  EXPECT_LT(cpu_ms(after) - cpu_ms(before), 250) << "the acceptor spins";
  EXPECT_EQ(log.Count({"accepting a transfer connection failed"}), 1u) << log.All();
  clients.clear();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  PullOptions options;
  options.secret = kSecret;
  RegionInfo info;
  Status s = Stat(options, ThePeer(), "arena/10/3", &info);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// A region that stays valid for its first `valid_checks` StillValid() calls: overwritten while
// a piece is on the wire.
class ExpiringRegion : public MemoryRegion {
 public:
  ExpiringRegion(std::vector<uint8_t> bytes, int valid_checks)
      : MemoryRegion(std::move(bytes), "manifest-3"), left_(valid_checks) {}
  bool StillValid() const override { return left_.fetch_sub(1) > 0; }

 private:
  mutable std::atomic<int> left_;
};

TEST_F(ServerTest, CopyChangedWhileAPieceWasSentIsTrustedOnlyIfItVerifies) {
  StartServer();
  // Valid before the first piece, changed by the time it has been sent.
  provider_.Add("arena/10/3-expiring", std::make_shared<ExpiringRegion>(expected_.bytes, 1));
  std::vector<uint8_t> dest(kBytes);
  PullRequest request;
  request.sources = {{ThePeer(), "arena/10/3-expiring"}, {ThePeer(), "arena/10/3"}};
  request.dest = dest.data();
  request.bytes = kBytes;
  request.chunk_bytes = expected_.chunk_bytes;
  request.verify = expected_.Verifier();
  PullOptions options;
  options.secret = kSecret;
  options.connections = 1;
  PullResult result;
  Status s = Pull(options, request, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest, expected_.bytes);
  bool noted = false;
  for (const std::string& note : result.notes)
    noted = noted || note.find("changed while this piece was sent") != std::string::npos;
  EXPECT_TRUE(noted);
  // The piece that was on the wire still verified (its chunk's bytes had not actually changed),
  // so only the three chunks never sent are fetched again.
  EXPECT_EQ(result.refetched_chunks, 3u);
  EXPECT_EQ(result.bytes_by_source["node0/tcp"], kBytes);  // both sources are on node0
}

// After authenticating, garbage still gets an Error or a closed connection, never a crash, and
// the server keeps serving everyone else.
TEST_F(ServerTest, FuzzedFramesAfterAuthenticationNeverBreakTheServer) {
  StartServer();
  std::vector<std::string> valid = {wire::EncodeOpen({0, "arena/10/3"}),
                                    wire::EncodeRead({0, 0, 4096, 1}),
                                    wire::EncodeFastConnect({0, "x"}), wire::EncodeClose(),
                                    wire::EncodeOpenReply({0, 1, "m", ""})};
  std::mt19937_64 rng(99);
  for (int i = 0; i < 150; ++i) {
    RawSocket raw(server_->port(), 2000);
    ASSERT_TRUE(raw.Authenticate(kSecret)) << i;
    if (rng() % 2) raw.SendSealed(wire::EncodeOpen({0, "arena/10/3"}));
    std::string frame = rng() % 4 ? raw.Seal(valid[rng() % valid.size()]) : valid[rng() % valid.size()];
    for (int k = 0; k < 3; ++k) frame[rng() % frame.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) frame.resize(rng() % frame.size());
    raw.Send(frame);
    shutdown(raw.fd(), SHUT_WR);  // a truncated frame then ends at EOF instead of waiting
    bool eof = false;
    raw.ReceiveAll(&eof);
    EXPECT_TRUE(eof) << "the server must answer and close, or close: iteration " << i;
  }
  PullOptions options;
  options.secret = kSecret;
  RegionInfo info;
  Status s = Stat(options, ThePeer(), "arena/10/3", &info);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(info.size, kBytes);
}

}  // namespace
}  // namespace ft::rdma

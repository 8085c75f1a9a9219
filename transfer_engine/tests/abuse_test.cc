// The transfer engine under abuse: a flood of connections that never authenticate, a peer
// dripping a frame a byte at a time, a frame far larger than a handshake needs before anyone
// has proven anything, a deadline that fires with a read in flight, a frame slipped into an
// authenticated session by someone who does not hold its keys, and secrets that are not secrets.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "tests/util/log_capture.h"
#include "transfer_engine/tests/raw_socket.h"
#include "transfer_engine/tests/test_regions.h"
#include "transfer_engine/transfer.h"

namespace ft::rdma {
namespace {

using namespace std::chrono_literals;
using testing::MapProvider;
using testing::MemoryRegion;
using testing::Pattern;
using testing::RawSocket;

constexpr char kSecret[] = "5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5ecc0de5";
constexpr uint64_t kBytes = 1ull << 20;

int OpenDescriptors() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.' ? 1 : 0;
  closedir(d);
  return n - 1;  // the directory's own
}

// A connection to 127.0.0.1:port from the source address `from` (any 127/8 address is local).
int ConnectFrom(const char* from, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, from, &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(port);
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

template <typename Done>
bool WaitFor(Done done, std::chrono::milliseconds timeout = 30s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

class ServerAbuseTest : public ::testing::Test {
 protected:
  void StartServer(std::chrono::milliseconds handshake_timeout = 5000ms) {
    region_ = std::make_shared<MemoryRegion>(Pattern(3, kBytes), "manifest-3");
    provider_.Add("arena/10/3", region_);
    ServerOptions options;
    options.listen_address = "127.0.0.1";
    options.secret = kSecret;
    options.provider = &provider_;
    options.handshake_timeout = handshake_timeout;
    server_ = std::make_unique<Server>(options);
    Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  Peer ThePeer() const { return {"node0", "127.0.0.1", server_->port()}; }

  std::shared_ptr<MemoryRegion> region_;
  MapProvider provider_;
  std::unique_ptr<Server> server_;
};

// Hundreds of connections from one address that never say hello: the server keeps only a few
// of them (each holds a descriptor until its handshake deadline and linger), closes the rest at
// once, and still serves a peer from another address meanwhile.
TEST_F(ServerAbuseTest, AFloodOfSilentConnectionsFromOneAddressIsCapped) {
  StartServer();
  test_util::LogCapture log;
  const int before = OpenDescriptors();
  constexpr int kFlood = 300;
  std::vector<int> flood;
  for (int i = 0; i < kFlood; ++i) {
    int fd = ConnectFrom("127.0.0.2", server_->port());
    ASSERT_GE(fd, 0) << i;
    flood.push_back(fd);
  }
  // Every one of them accepted (and kept or closed) by the server.
  ASSERT_TRUE(WaitFor([&] { return server_->stats().connections >= static_cast<uint64_t>(kFlood); }))
      << server_->stats().connections;
  std::this_thread::sleep_for(100ms);
  const int held = OpenDescriptors() - before - kFlood;
  std::printf("flood: %d connections from one address, the server holds %d descriptors\n", kFlood, held);
  EXPECT_LE(held, 32) << "the server keeps a descriptor for every unauthenticated connection";

  PullOptions options;
  options.secret = kSecret;
  RegionInfo info;
  Status s = Stat(options, ThePeer(), "arena/10/3", &info);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(info.size, kBytes);
  for (int fd : flood) close(fd);
  EXPECT_LE(log.Count({"connections"}), 4u) << "not one line per refused connection:\n" << log.All();
}

// Refusals are logged once a minute per address: the table that remembers when is bounded,
// however many addresses knock.
TEST_F(ServerAbuseTest, TheRefusalLogRemembersABoundedNumberOfAddresses) {
  StartServer();
  test_util::LogCapture log;
  constexpr int kAddresses = 1500;
  for (int i = 0; i < kAddresses; ++i) {
    char from[32];
    std::snprintf(from, sizeof(from), "127.1.%d.%d", i / 250, 1 + i % 250);
    int fd = ConnectFrom(from, server_->port());
    ASSERT_GE(fd, 0) << from;
    RawSocket raw(fd);
    ASSERT_TRUE(raw.Send(wire::EncodeClose()));
    bool eof = false;
    raw.ReceiveAll(&eof);
  }
  EXPECT_EQ(server_->stats().auth_refused, static_cast<uint64_t>(kAddresses));
  EXPECT_LE(server_->stats().refusal_log_addresses, 1024u);
  EXPECT_GT(server_->stats().refusal_log_addresses, 0u);
  EXPECT_LE(log.Count({"refused transfer peer"}), 1100u);
}

// The handshake deadline fires while the server waits for the rest of a frame: it refuses and
// lingers, and the read still in flight is the only one (Asio allows one at a time): bytes that
// then complete the frame are drained, not parsed as a second frame that closes the socket
// before its linger (a closed socket answers the peer's next bytes with a reset, and a reset
// discards what the peer had not read yet).
TEST_F(ServerAbuseTest, AHandshakeDeadlineMidFrameLingersWithTheReadInFlight) {
  StartServer(200ms);
  RawSocket raw(server_->port(), 10000);
  const std::string hello = wire::EncodeHello({kProtocolVersion, {}});
  ASSERT_TRUE(raw.Send(hello.substr(0, 6)));
  EXPECT_EQ(raw.Receive(wire::kHeaderBytes), wire::EncodeAuthRefused());
  ASSERT_TRUE(raw.Send("garbage garbage garbage"));  // completes the header the server waits for
  std::this_thread::sleep_for(300ms);
  // Still lingering (2 s), the server drains this too; a closed socket would reset.
  ASSERT_TRUE(raw.Send("more"));
  std::this_thread::sleep_for(100ms);
  const ssize_t n = send(raw.fd(), "again", 5, MSG_NOSIGNAL);
  const int err = errno;
  EXPECT_EQ(n, 5) << "the connection was reset: " << std::strerror(err);
  EXPECT_EQ(server_->stats().auth_refused, 1u);
}

// Someone on the path between two authenticated peers (or holding a session after its
// handshake) writes a frame of their own into it: without the session's keys it is refused and
// the connection closed, with nothing about the region sent.
TEST_F(ServerAbuseTest, AFrameInjectedIntoAnAuthenticatedSessionIsRefused) {
  StartServer();
  RawSocket raw(server_->port());
  ASSERT_TRUE(raw.Authenticate(kSecret));
  ASSERT_TRUE(raw.Send(wire::EncodeOpen({0, "arena/10/3"})));  // not sealed with the session's keys
  bool eof = false;
  const std::string answer = raw.ReceiveAll(&eof);
  EXPECT_TRUE(eof);
  EXPECT_EQ(answer.find("manifest-3"), std::string::npos) << "the injected open was answered";
  wire::FrameHeader h;
  if (answer.size() >= wire::kHeaderBytes &&
      wire::ParseHeader(reinterpret_cast<const uint8_t*>(answer.data()), &h).ok()) {
    EXPECT_NE(h.type, wire::MessageType::kOpenReply);
  }
  EXPECT_EQ(server_->stats().bytes_sent, 0u);
}

// Asked to, the server encrypts the data bytes too: the pull lands the same bytes, and none of
// them crosses the wire in the clear.
TEST_F(ServerAbuseTest, AnEncryptedPullLandsTheSameBytesAndNoneOfThemInTheClear) {
  StartServer();
  const std::vector<uint8_t> expected = Pattern(3, kBytes);
  std::vector<uint8_t> dest(kBytes);
  PullRequest request;
  request.sources = {{ThePeer(), "arena/10/3"}};
  request.dest = dest.data();
  request.bytes = kBytes;
  request.chunk_bytes = 256 << 10;
  PullOptions options;
  options.secret = kSecret;
  options.encrypt_data = true;
  PullResult result;
  Status s = Pull(options, request, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest, expected);

  RawSocket raw(server_->port());
  ASSERT_TRUE(raw.Authenticate(kSecret));
  ASSERT_TRUE(raw.SendSealed(wire::EncodeOpen({wire::kOpenEncryptData, "arena/10/3"})));
  wire::FrameHeader h;
  std::string payload;
  ASSERT_TRUE(raw.ReceiveFrame(&h, &payload));
  ASSERT_EQ(h.type, wire::MessageType::kOpenReply);
  ASSERT_TRUE(raw.SendSealed(wire::EncodeRead({0, 0, 4096, 1})));
  const std::string frame = raw.Receive(wire::kHeaderBytes + wire::kDataHeaderBytes + 2 * wire::kTagBytes + 4096);
  ASSERT_EQ(frame.size(), wire::kHeaderBytes + wire::kDataHeaderBytes + 2 * wire::kTagBytes + 4096);
  const std::string clear(reinterpret_cast<const char*>(expected.data()) + 512, 64);
  EXPECT_EQ(frame.find(clear), std::string::npos) << "checkpoint bytes in the clear";
}

// ---- the client against servers that abuse it ----------------------------------------------

// A listener on loopback whose one connection `serve` handles in a thread; the destructor stops
// it (closing the connection ends a drip).
class FakeServer {
 public:
  explicit FakeServer(std::function<void(RawSocket&, const std::atomic<bool>& stop)> serve) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listener_, 4);
    socklen_t len = sizeof(a);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, serve = std::move(serve)] {
      int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      RawSocket conn(fd);
      serve(conn, stop_);
    });
  }
  ~FakeServer() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    thread_.join();
    close(listener_);
  }
  uint16_t port() const { return port_; }

 private:
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Before anyone proved the secret a server may send a challenge, a refusal or an error of a
// few hundred bytes; a header announcing a 16 MiB open reply is refused on the spot, not read.
TEST(ClientAbuseTest, ALargeFrameBeforeAuthenticationIsRefusedAtItsHeader) {
  FakeServer fake([](RawSocket& conn, const std::atomic<bool>& stop) {
    wire::FrameHeader h;
    std::string payload;
    if (!conn.ReceiveFrame(&h, &payload)) return;  // hello
    uint8_t header[wire::kHeaderBytes];
    wire::EncodeHeader(wire::MessageType::kOpenReply, static_cast<uint32_t>(wire::MaxPayload(wire::MessageType::kOpenReply)),
                       header);
    conn.Send(std::string_view(reinterpret_cast<char*>(header), sizeof(header)));
    while (!stop) std::this_thread::sleep_for(10ms);
  });
  PullOptions options;
  options.secret = kSecret;
  options.io_timeout = 3000ms;
  RegionInfo info;
  Status s = Stat(options, {"fake", "127.0.0.1", fake.port()}, "arena/10/3", &info);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
}

// A server that answers a byte at a time, each just before the I/O timeout would give it up:
// the frame has a deadline of its own and a rate floor, so the client gives up in seconds, not
// after the hours the drip would take.
TEST(ClientAbuseTest, AServerDrippingAFrameIsGivenUpAtTheFramesDeadline) {
  FakeServer fake([](RawSocket& conn, const std::atomic<bool>& stop) {
    wire::FrameHeader h;
    std::string payload;
    if (!conn.ReceiveFrame(&h, &payload)) return;  // hello
    const std::string frame = wire::EncodeError({wire::ErrorCode::kInternal, 0, std::string(1000, 'x')});
    for (char c : frame) {
      if (stop || !conn.Send(std::string_view(&c, 1))) return;
      std::this_thread::sleep_for(200ms);
    }
  });
  PullOptions options;
  options.secret = kSecret;
  options.io_timeout = 1000ms;
  auto result = std::async(std::launch::async, [&] {
    RegionInfo info;
    return Stat(options, {"fake", "127.0.0.1", fake.port()}, "arena/10/3", &info);
  });
  ASSERT_EQ(result.wait_for(60s), std::future_status::ready) << "the drip holds the client";
  Status s = result.get();
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
}

// A server that proved the secret, then a frame in its session that it did not seal (someone
// on the path writing into the stream): the client refuses it and reads nothing from it.
TEST(ClientAbuseTest, AFrameForgedIntoTheClientsSessionIsRefused) {
  FakeServer fake([](RawSocket& conn, const std::atomic<bool>& stop) {
    wire::FrameHeader h;
    std::string payload;
    wire::Hello hello;
    if (!conn.ReceiveFrame(&h, &payload) || !wire::DecodeHello(payload, &hello).ok()) return;
    wire::Nonce server_nonce{};
    server_nonce[0] = 7;
    conn.Send(wire::EncodeChallenge({server_nonce}));
    if (!conn.ReceiveFrame(&h, &payload)) return;  // response
    conn.Send(wire::EncodeAuthOk(
        {auth::ComputeMac(kSecret, auth::Role::kServer, server_nonce, hello.client_nonce)}));
    if (!conn.ReceiveFrame(&h, &payload)) return;  // the sealed open
    conn.Send(wire::EncodeOpenReply({0, 4096, "forged-manifest", ""}));
    while (!stop) std::this_thread::sleep_for(10ms);
  });
  PullOptions options;
  options.secret = kSecret;
  options.io_timeout = 3000ms;
  RegionInfo info;
  Status s = Stat(options, {"fake", "127.0.0.1", fake.port()}, "arena/10/3", &info);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
  EXPECT_EQ(info.meta, "");
}

// The job's secret is 64 hex digits (ftmaster makes it so); the server refuses to start with
// anything else, and so does the client: a value that is not a secret never reaches a peer.
TEST(ClientAbuseTest, AMalformedSecretIsRefusedBeforeConnecting) {
  MapProvider provider;
  ServerOptions so;
  so.listen_address = "127.0.0.1";
  so.secret = kSecret;
  so.provider = &provider;
  Server server(so);
  ASSERT_TRUE(server.Start().ok());
  for (std::string bad : {std::string("not-a-secret"), std::string(63, 'a'), std::string(65, 'a'),
                          std::string(64, 'g'), std::string(kSecret).substr(0, 62) + "\n\n"}) {
    PullOptions options;
    options.secret = bad;
    RegionInfo info;
    Status s = Stat(options, {"n", "127.0.0.1", server.port()}, "arena/1/0", &info);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    ServerOptions refused = so;
    refused.secret = bad;
    refused.port = 0;
    Server other(refused);
    EXPECT_EQ(other.Start().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(server.stats().connections, 0u) << "a malformed secret reached the server";
}

}  // namespace
}  // namespace ft::rdma

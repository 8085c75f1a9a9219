#include "metrics/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/registry.h"

namespace ft::metrics {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

int Connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& text) {
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Everything until the peer closes (or `limit` passes: then *closed is false).
std::string ReadUntilClosed(int fd, milliseconds limit, bool* closed) {
  std::string out;
  const auto end = steady_clock::now() + limit;
  *closed = false;
  while (steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    int left = static_cast<int>(std::chrono::duration_cast<milliseconds>(end - steady_clock::now()).count());
    if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      *closed = true;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string Request(uint16_t port, const std::string& request, bool* closed) {
  int fd = Connect(port);
  EXPECT_GE(fd, 0);
  SendAll(fd, request);
  std::string reply = ReadUntilClosed(fd, milliseconds(20000), closed);
  close(fd);
  return reply;
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void Start(ServerOptions options = {}) {
    ASSERT_TRUE(registry_.Declare("ft_test_total", Kind::kCounter, "Test.", {"rank"}).ok());
    ASSERT_TRUE(registry_.Add("ft_test_total", {"3"}, 7).ok());
    if (options.address.empty()) options.address = "127.0.0.1:0";
    ASSERT_TRUE(Server::Start(options, [this] { return registry_.Render(); }, &server_).ok());
  }
  Registry registry_;
  std::unique_ptr<Server> server_;
};

TEST_F(MetricsServerTest, GetMetricsServesTheRegistry) {
  Start();
  ASSERT_NE(server_->port(), 0);
  EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(server_->port()));
  bool closed = false;
  std::string reply = Request(server_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << reply;
  EXPECT_NE(reply.find("\r\n\r\n" + registry_.Render()), std::string::npos) << reply;
  EXPECT_NE(reply.find("ft_test_total{rank=\"3\"} 7\n"), std::string::npos);
  EXPECT_EQ(server_->scrapes(), 1u);
}

TEST_F(MetricsServerTest, KeepAliveServesSeveralScrapesOnOneConnection) {
  Start();
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  bool closed = false;
  std::string reply = ReadUntilClosed(fd, milliseconds(20000), &closed);
  close(fd);
  EXPECT_TRUE(closed);
  size_t first = reply.find("HTTP/1.1 200 OK");
  ASSERT_NE(first, std::string::npos);
  EXPECT_NE(reply.find("HTTP/1.1 200 OK", first + 1), std::string::npos) << reply;
  EXPECT_EQ(server_->scrapes(), 2u);
}

TEST_F(MetricsServerTest, OtherPathsAre404AndOtherMethods405) {
  Start();
  bool closed = false;
  std::string reply = Request(server_->port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 404", 0), 0u) << reply;
  reply = Request(server_->port(), "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nab", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 405", 0), 0u) << reply;
  EXPECT_NE(reply.find("Allow: GET"), std::string::npos) << reply;
  EXPECT_EQ(reply.find("ft_test_total"), std::string::npos);
  EXPECT_EQ(server_->scrapes(), 0u);
}

// Extra routes (ftmaster's page): their own Content-Type and body, rendered per request; an
// unknown path is still 404, another method 405, and /metrics stays the registry's.
TEST_F(MetricsServerTest, ExtraRoutesServeTheirOwnBodyAndContentType) {
  ServerOptions options;
  int renders = 0;
  options.routes["/"] = {"text/html; charset=utf-8", [&renders] { return "<p>page " + std::to_string(++renders) + "</p>"; }};
  options.routes["/api/job.json"] = {"application/json", [] { return std::string("{\"state\":\"running\"}"); }};
  options.routes["/metrics"] = {"text/html", [] { return std::string("not the registry"); }};
  Start(options);
  bool closed = false;
  std::string reply = Request(server_->port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Type: text/html; charset=utf-8\r\n"), std::string::npos) << reply;
  EXPECT_NE(reply.find("\r\n\r\n<p>page 1</p>"), std::string::npos) << reply;
  reply = Request(server_->port(), "GET /?refresh=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_NE(reply.find("<p>page 2</p>"), std::string::npos) << "rendered again per request: " << reply;
  reply = Request(server_->port(), "GET /api/job.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find("Content-Type: application/json\r\n"), std::string::npos) << reply;
  EXPECT_NE(reply.find("\r\n\r\n{\"state\":\"running\"}"), std::string::npos) << reply;
  reply = Request(server_->port(), "GET /api/nothing.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 404", 0), 0u) << reply;
  reply = Request(server_->port(), "GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 404", 0), 0u) << reply;
  reply = Request(server_->port(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nab", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 405", 0), 0u) << reply;
  EXPECT_EQ(reply.find("<p>page"), std::string::npos) << reply;
  EXPECT_EQ(renders, 2);
  // /metrics is the registry's whatever the routes say.
  reply = Request(server_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_NE(reply.find("ft_test_total{rank=\"3\"} 7\n"), std::string::npos) << reply;
  EXPECT_NE(reply.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << reply;
  EXPECT_EQ(server_->scrapes(), 1u) << "a page request is not a scrape";
}

// A route keeps the request limits.
TEST_F(MetricsServerTest, ARouteKeepsTheRequestSizeLimit) {
  ServerOptions options;
  options.max_request_bytes = 1024;
  options.routes["/"] = {"text/html", [] { return std::string("<p>page</p>"); }};
  Start(options);
  bool closed = false;
  std::string reply = Request(server_->port(), "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'y') +
                                                   "\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(reply.find("<p>page</p>"), std::string::npos) << reply;
  EXPECT_EQ(reply.find("200 OK"), std::string::npos) << reply;
}

TEST_F(MetricsServerTest, AClientThatSendsNothingIsCutOffAtTheDeadline) {
  ServerOptions options;
  options.read_timeout = milliseconds(300);
  Start(options);
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /metr");  // and then nothing
  const auto t0 = steady_clock::now();
  bool closed = false;
  std::string reply = ReadUntilClosed(fd, milliseconds(20000), &closed);
  const auto waited = steady_clock::now() - t0;
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_EQ(reply, "");
  EXPECT_GE(waited, milliseconds(250));
  // Meanwhile and afterwards, others are served.
  reply = Request(server_->port(), "GET /metrics HTTP/1.0\r\n\r\n", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.0 200 OK", 0), 0u) << reply;
}

TEST_F(MetricsServerTest, AnOversizedRequestIsRefused) {
  ServerOptions options;
  options.max_request_bytes = 1024;
  Start(options);
  bool closed = false;
  std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'y') +
                        "\r\nConnection: close\r\n\r\n";
  std::string reply = Request(server_->port(), request, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(reply.find("200 OK"), std::string::npos) << reply;
  EXPECT_EQ(server_->scrapes(), 0u);
  // Just under the limit is fine.
  request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(700, 'y') + "\r\nConnection: close\r\n\r\n";
  reply = Request(server_->port(), request, &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK", 0), 0u) << reply;
}

// At the limit, a new connection closes the one that has waited longest for its request:
// connections that send nothing (or half a request) never keep a scrape out.
TEST_F(MetricsServerTest, IdleConnectionsAtTheLimitMakeRoomForAScrape) {
  Start();  // the default limit, 16
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(Connect(server_->port()));
    ASSERT_GE(idle.back(), 0);
    if (i % 2 == 1) SendAll(idle.back(), "GET /met");  // half of them mid-request
  }
  std::this_thread::sleep_for(milliseconds(100));  // the server has accepted them all
  const auto start = steady_clock::now();
  bool closed = false;
  std::string reply = Request(server_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK", 0), 0u) << "a scrape behind 16 idle connections: '" << reply << "'";
  EXPECT_LT(steady_clock::now() - start, milliseconds(2500)) << "it waited for an idle one's deadline";
  bool first_closed = false;
  ReadUntilClosed(idle[0], milliseconds(2000), &first_closed);
  EXPECT_TRUE(first_closed) << "the longest-waiting connection made room";
  for (int fd : idle) close(fd);
}

TEST_F(MetricsServerTest, StopClosesTheListenerWithOpenConnections) {
  Start();
  const uint16_t port = server_->port();
  int fd = Connect(port);
  ASSERT_GE(fd, 0);
  // A keep-alive connection that was served once: the server holds it open, reading the next
  // request, when Stop comes.
  SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string reply;
  while (reply.find("ft_test_total{rank=\"3\"} 7\n") == std::string::npos) {
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    reply.append(buf, static_cast<size_t>(n));
  }
  server_->Stop();
  server_->Stop();  // idempotent
  bool closed = false;
  ReadUntilClosed(fd, milliseconds(20000), &closed);
  EXPECT_TRUE(closed);
  close(fd);
  EXPECT_LT(Connect(port), 0);
}

TEST(MetricsAddressTest, SplitsHostAndPort) {
  std::string host;
  uint16_t port = 1;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:9464", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 9464);
  ASSERT_TRUE(SplitHostPort("[::1]:0", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 0);
  EXPECT_FALSE(SplitHostPort("127.0.0.1", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort(":9464", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort("h:99999", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort("h:9x", &host, &port).ok());
  EXPECT_FALSE(SplitHostPort("::1:80", &host, &port).ok());
  std::unique_ptr<Server> server;
  ServerOptions options;
  options.address = "bad";
  EXPECT_FALSE(Server::Start(options, [] { return std::string(); }, &server).ok());
}

}  // namespace
}  // namespace ft::metrics

// A raw TCP client for tests that must speak the wire protocol by hand (hostile or half-done
// handshakes, fuzzed frames) or play a fake server.
#ifndef FT_TRANSFER_ENGINE_TESTS_RAW_SOCKET_H_
#define FT_TRANSFER_ENGINE_TESTS_RAW_SOCKET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "transfer_engine/auth.h"
#include "transfer_engine/channel.h"
#include "transfer_engine/wire.h"

namespace ft::rdma::testing {

class RawSocket {
 public:
  explicit RawSocket(uint16_t port, int timeout_ms = 5000) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  explicit RawSocket(int fd) : fd_(fd), connected_(true) {}
  ~RawSocket() {
    if (fd_ >= 0) close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return connected_; }
  bool Send(std::string_view bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Exactly n bytes, or fewer at EOF, error or timeout.
  std::string Receive(size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      ssize_t r = recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
  }
  // Everything until the peer closes (or the timeout); *eof says whether it closed.
  std::string ReceiveAll(bool* eof) {
    std::string out;
    char buf[4096];
    *eof = false;
    while (true) {
      ssize_t r = recv(fd_, buf, sizeof(buf), 0);
      if (r == 0) *eof = true;
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // A whole frame: header, then its declared payload (opened after Authenticate).
  bool ReceiveFrame(wire::FrameHeader* header, std::string* payload) {
    std::string h = Receive(wire::kHeaderBytes);
    if (h.size() != wire::kHeaderBytes) return false;
    if (!wire::ParseHeader(reinterpret_cast<const uint8_t*>(h.data()), header).ok()) return false;
    *payload = Receive(header->length);
    if (payload->size() != header->length) return false;
    return !receive_.started() || receive_.OpenPayload(reinterpret_cast<const uint8_t*>(h.data()), payload).ok();
  }
  // A frame sealed as the session's next message (after Authenticate), as a client sends it.
  std::string Seal(std::string frame) {
    (void)send_.SealFrame(&frame);
    return frame;
  }
  bool SendSealed(std::string frame) { return Send(Seal(std::move(frame))); }
  // Runs the client's side of the handshake by hand; true when the server accepted it.
  bool Authenticate(const std::string& secret) {
    wire::Hello hello{kProtocolVersion, {}};
    (void)auth::RandomNonce(&hello.client_nonce);
    if (!Send(wire::EncodeHello(hello))) return false;
    wire::FrameHeader h;
    std::string payload;
    wire::Challenge challenge;
    if (!ReceiveFrame(&h, &payload) || !wire::DecodeChallenge(payload, &challenge).ok()) return false;
    wire::Response response{auth::ComputeMac(secret, auth::Role::kClient, challenge.server_nonce,
                                             hello.client_nonce)};
    if (!Send(wire::EncodeResponse(response))) return false;
    if (!ReceiveFrame(&h, &payload) || h.type != wire::MessageType::kAuthOk) return false;
    (void)send_.Start(auth::DeriveKey(secret, auth::Role::kClient, challenge.server_nonce, hello.client_nonce), true);
    (void)receive_.Start(auth::DeriveKey(secret, auth::Role::kServer, challenge.server_nonce, hello.client_nonce),
                         false);
    return true;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  Sealer send_, receive_;
};

// A loopback listener on a free port, for a test that plays a server by hand: Accept() gives
// the next connection as a RawSocket.
class RawListener {
 public:
  RawListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    listening_ = bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd_, 4) == 0 &&
                 getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    port_ = ntohs(a.sin_port);
  }
  ~RawListener() {
    if (fd_ >= 0) close(fd_);
  }
  RawListener(const RawListener&) = delete;
  RawListener& operator=(const RawListener&) = delete;

  bool listening() const { return listening_; }
  uint16_t port() const { return port_; }
  std::unique_ptr<RawSocket> Accept() { return std::make_unique<RawSocket>(accept(fd_, nullptr, nullptr)); }

 private:
  int fd_ = -1;
  bool listening_ = false;
  uint16_t port_ = 0;
};

}  // namespace ft::rdma::testing

#endif  // FT_TRANSFER_ENGINE_TESTS_RAW_SOCKET_H_

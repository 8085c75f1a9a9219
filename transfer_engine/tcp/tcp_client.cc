#include "transfer_engine/tcp/tcp_client.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "transfer_engine/auth.h"
#include "transfer_engine/tcp/socket_tuning.h"

namespace ft::rdma {
namespace {

std::string Where(const Peer& peer) {
  return fmt::format("{} ({}:{})", peer.node, peer.address, peer.port);
}

// A send or recv that failed with `err` (not EINTR): a timeout when the socket's I/O timeout
// ran out with nothing moved (SO_SNDTIMEO/SO_RCVTIMEO give EAGAIN), else the connection is lost.
Status IoFailure(int err, const Peer& peer, std::string_view doing, std::string_view idle) {
  if (err == EAGAIN || err == EWOULDBLOCK)
    return Status::Timeout(fmt::format("{} {} within the I/O timeout", Where(peer), idle));
  return Status::Unavailable(fmt::format("{} {}: {}", doing, Where(peer), std::strerror(err)));
}

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Non-blocking connect bounded by `timeout`, then back to blocking with I/O timeouts.
Status ConnectWithTimeout(const Peer& peer, std::chrono::milliseconds timeout,
                          std::chrono::milliseconds io_timeout, int* out_fd) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(peer.port);
  int rc = getaddrinfo(peer.address.c_str(), port.c_str(), &hints, &found);
  if (rc != 0)
    return Status::Unavailable(fmt::format("cannot resolve {}: {}", Where(peer), gai_strerror(rc)));
  Status last = Status::Unavailable(fmt::format("no address for {}", Where(peer)));
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      int err = errno;
      last = Status::FromErrno(err, "socket");
      continue;
    }
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int ready = poll(&p, 1, static_cast<int>(timeout.count()));
        if (ready == 0) {
          err = ETIMEDOUT;
        } else if (ready < 0) {
          err = errno;
        } else {
          socklen_t len = sizeof(err);
          if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
    }
    if (err != 0) {
      close(fd);
      last = err == ETIMEDOUT
                 ? Status::Unavailable(fmt::format("connecting to {}: no answer in {} ms",
                                                   Where(peer), timeout.count()))
                 : Status::Unavailable(fmt::format("connecting to {}: {}", Where(peer),
                                                   std::strerror(err)));
      continue;
    }
    int flags = fcntl(fd, F_GETFL);
    (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    timeval tv = ToTimeval(io_timeout);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    TuneSocket(fd, SocketRole::kClient);
    freeaddrinfo(found);
    *out_fd = fd;
    return Status::Ok();
  }
  freeaddrinfo(found);
  return last;
}

// A reply of another type than the request expects: the peer's error frame (its status, and the
// tag of the read it answers where `error_tag` is asked), or anything else, which is Corrupt.
Status UnexpectedReply(const Peer& peer, wire::MessageType type, std::string_view payload,
                       std::string_view request, uint64_t* error_tag = nullptr) {
  if (type != wire::MessageType::kError) {
    return Status::Corrupt(fmt::format("{} answered {} with {}", Where(peer), request, wire::MessageTypeName(type)));
  }
  wire::Error error;
  FT_RETURN_IF_ERROR(wire::DecodeError(payload, &error));
  if (error_tag != nullptr) *error_tag = error.tag;
  return wire::StatusFromError(error.code, error.text).WithContext(Where(peer));
}

}  // namespace

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

Status Connection::Open(const PullOptions& options, const Peer& peer,
                        std::unique_ptr<Connection>* out) {
  if (options.secret.empty())
    return Status::InvalidArgument("no transfer secret: peers would refuse us");
  FT_RETURN_IF_ERROR(auth::CheckSecret(options.secret));
  int fd = -1;
  FT_RETURN_IF_ERROR(ConnectWithTimeout(peer, options.connect_timeout, options.io_timeout, &fd));
  std::unique_ptr<Connection> connection(new Connection(fd, peer, options));
  FT_RETURN_IF_ERROR(connection->Handshake(options.secret));
  *out = std::move(connection);
  return Status::Ok();
}

Status Connection::Handshake(const std::string& secret) {
  wire::Hello hello;
  hello.max_version = kProtocolVersion;
  FT_RETURN_IF_ERROR(auth::RandomNonce(&hello.client_nonce));
  FT_RETURN_IF_ERROR(SendAll(wire::EncodeHello(hello)));

  wire::FrameHeader header;
  std::string payload;
  FT_RETURN_IF_ERROR(ReceiveFrame(&header, &payload));
  if (header.type == wire::MessageType::kAuthRefused)
    return Status::Unavailable(fmt::format("{} refused the handshake", Where(peer_)));
  if (header.type != wire::MessageType::kChallenge) {  // an error: e.g. it speaks another version
    return UnexpectedReply(peer_, header.type, payload, "hello");
  }
  wire::Challenge challenge;
  FT_RETURN_IF_ERROR(wire::DecodeChallenge(payload, &challenge));
  wire::Response response{auth::ComputeMac(secret, auth::Role::kClient, challenge.server_nonce,
                                           hello.client_nonce)};
  FT_RETURN_IF_ERROR(SendAll(wire::EncodeResponse(response)));

  FT_RETURN_IF_ERROR(ReceiveFrame(&header, &payload));
  if (header.type == wire::MessageType::kAuthRefused)
    return Status::Unavailable(fmt::format(
        "{} refused our proof of the job's transfer secret (a different secret or job?)",
        Where(peer_)));
  if (header.type != wire::MessageType::kAuthOk)
    return Status::Corrupt(fmt::format("{} answered response with {}", Where(peer_),
                                       wire::MessageTypeName(header.type)));
  wire::AuthOk ok;
  FT_RETURN_IF_ERROR(wire::DecodeAuthOk(payload, &ok));
  if (!auth::VerifyMac(secret, auth::Role::kServer, challenge.server_nonce, hello.client_nonce,
                       ok.mac))
    return Status::Unavailable(fmt::format(
        "{} could not prove the job's transfer secret: not a peer of this job; nothing read",
        Where(peer_)));
  FT_RETURN_IF_ERROR(send_.Start(
      auth::DeriveKey(secret, auth::Role::kClient, challenge.server_nonce, hello.client_nonce), true));
  return receive_.Start(
      auth::DeriveKey(secret, auth::Role::kServer, challenge.server_nonce, hello.client_nonce), false);
}

Status Connection::SendFrame(std::string frame) {
  if (send_.started()) FT_RETURN_IF_ERROR(send_.SealFrame(&frame));
  return SendAll(frame);
}

Status Connection::ReceiveReply(wire::MessageType expected, std::string_view request,
                                std::string* payload) {
  wire::FrameHeader header;
  FT_RETURN_IF_ERROR(ReceiveFrame(&header, payload));
  if (header.type != expected) return UnexpectedReply(peer_, header.type, *payload, request);
  return Status::Ok();
}

Status Connection::OpenRegion(const std::string& name, wire::OpenReply* out, uint32_t flags) {
  if (name.empty() || name.size() > wire::kMaxNameBytes)
    return Status::InvalidArgument(fmt::format("region name of {} bytes (1..{})", name.size(),
                                               wire::kMaxNameBytes));
  if (encrypt_data_) flags |= wire::kOpenEncryptData;
  FT_RETURN_IF_ERROR(SendFrame(wire::EncodeOpen({flags, name})));
  std::string payload;
  FT_RETURN_IF_ERROR(ReceiveReply(wire::MessageType::kOpenReply, "open", &payload));
  return wire::DecodeOpenReply(payload, out);
}

Status Connection::FastConnect(uint32_t handle, std::string_view request, std::string* reply) {
  if (request.size() > wire::kMaxOfferBytes)
    return Status::InvalidArgument("fast-path request above the protocol's limit");
  FT_RETURN_IF_ERROR(SendFrame(wire::EncodeFastConnect({handle, std::string(request)})));
  std::string payload;
  FT_RETURN_IF_ERROR(ReceiveReply(wire::MessageType::kFastConnectReply, "fast-connect", &payload));
  wire::FastConnectReply decoded;
  FT_RETURN_IF_ERROR(wire::DecodeFastConnectReply(payload, &decoded));
  *reply = std::move(decoded.reply);
  return Status::Ok();
}

Status Connection::SendRead(const wire::Read& read) { return SendFrame(wire::EncodeRead(read)); }

Status Connection::ReceiveDataHeader(wire::DataHeader* out, uint64_t* error_tag, RateFloor* floor) {
  // header | sealed data header | its tag, then the bytes (ReceiveData)
  uint8_t prefix[wire::kHeaderBytes + wire::kDataHeaderBytes + wire::kTagBytes];
  FT_RETURN_IF_ERROR(ReceiveBytes(prefix, wire::kHeaderBytes, floor));
  wire::FrameHeader header;
  FT_RETURN_IF_ERROR(wire::ParseHeader(prefix, &header));
  if (header.type != wire::MessageType::kData) {
    std::string payload;
    if (header.type == wire::MessageType::kError) FT_RETURN_IF_ERROR(ReceivePayload(prefix, header, &payload));
    return UnexpectedReply(peer_, header.type, payload, "read", error_tag);
  }
  const uint32_t overhead = static_cast<uint32_t>(wire::kTagBytes + (encrypt_data_ ? wire::kTagBytes : 0));
  if (header.length < wire::kDataHeaderBytes + overhead)
    return Status::Corrupt(fmt::format("{} sent a data frame of {} bytes", Where(peer_), header.length));
  uint8_t* data_header = prefix + wire::kHeaderBytes;
  FT_RETURN_IF_ERROR(ReceiveBytes(data_header, wire::kDataHeaderBytes + wire::kTagBytes, floor));
  // Authenticated before a byte of it lands in the destination.
  FT_RETURN_IF_ERROR(receive_.Begin(std::string_view(reinterpret_cast<const char*>(prefix), wire::kHeaderBytes)));
  FT_RETURN_IF_ERROR(receive_.Update(data_header, data_header, wire::kDataHeaderBytes));
  Status opened = receive_.FinishOpen(data_header + wire::kDataHeaderBytes);
  if (!opened.ok()) return opened.WithContext(Where(peer_));
  data_encrypted_ = encrypt_data_;
  return wire::DecodeDataHeader(
      std::string_view(reinterpret_cast<const char*>(data_header), wire::kDataHeaderBytes),
      header.length - overhead, out);
}

Status Connection::ReceiveData(uint8_t* dest, uint64_t len, RateFloor* floor) {
  if (!data_encrypted_) return ReceiveBytes(dest, len, floor);
  FT_RETURN_IF_ERROR(ReceiveBytes(dest, len, floor));
  uint8_t tag[wire::kTagBytes];
  FT_RETURN_IF_ERROR(ReceiveBytes(tag, sizeof(tag), floor));
  FT_RETURN_IF_ERROR(receive_.Begin({}));
  FT_RETURN_IF_ERROR(receive_.Update(dest, dest, len));
  Status opened = receive_.FinishOpen(tag);
  return opened.ok() ? opened : opened.WithContext(Where(peer_));
}

Status Connection::ReceiveBytes(uint8_t* dest, uint64_t len, RateFloor* floor) {
  uint64_t got = 0;
  while (got < len) {
    // MSG_WAITALL returns early with what it has once the receive timeout (the I/O timeout,
    // counted over the whole call) expires: a trickling peer is checked at least that often.
    ssize_t n = recv(fd_, dest + got, len - got, MSG_WAITALL);
    if (n > 0) {
      got += static_cast<uint64_t>(n);
      if (floor != nullptr) {
        Status s = floor->Add(static_cast<uint64_t>(n), RateFloor::Clock::now());
        if (!s.ok()) return s.WithContext(Where(peer_));
      }
      continue;
    }
    if (n == 0)
      return Status::Unavailable(fmt::format("{} closed the connection", Where(peer_)));
    int err = errno;
    if (err == EINTR) continue;
    return IoFailure(err, peer_, "receiving from", "sent nothing");
  }
  return Status::Ok();
}

Status Connection::SendAll(std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    int err = errno;
    if (err == EINTR) continue;
    return IoFailure(err, peer_, "sending to", "accepted nothing");
  }
  return Status::Ok();
}

Status Connection::ReceiveBytesBy(uint8_t* dest, uint64_t len, std::chrono::steady_clock::time_point deadline) {
  uint64_t got = 0;
  while (got < len) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return Status::Timeout(fmt::format("{} sent {} of a {}-byte frame within its deadline", Where(peer_), got, len));
    pollfd p{fd_, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (ready < 0 && errno != EINTR)
      return Status::Unavailable(fmt::format("waiting for {}: {}", Where(peer_), std::strerror(errno)));
    if (ready <= 0) continue;
    ssize_t n = recv(fd_, dest + got, len - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<uint64_t>(n);
      continue;
    }
    if (n == 0) return Status::Unavailable(fmt::format("{} closed the connection", Where(peer_)));
    int err = errno;
    if (err == EINTR || err == EAGAIN || err == EWOULDBLOCK) continue;
    return Status::Unavailable(fmt::format("receiving from {}: {}", Where(peer_), std::strerror(err)));
  }
  return Status::Ok();
}

Status Connection::ReceivePayload(const uint8_t* header_bytes, const wire::FrameHeader& header,
                                  std::string* payload) {
  // The frame's deadline: the I/O timeout, plus its length at the rate floor.
  auto budget = std::chrono::duration_cast<std::chrono::steady_clock::duration>(io_timeout_);
  if (min_bytes_per_second_ > 0)
    budget += std::chrono::milliseconds(header.length * 1000 / min_bytes_per_second_);
  payload->assign(header.length, '\0');
  FT_RETURN_IF_ERROR(ReceiveBytesBy(reinterpret_cast<uint8_t*>(payload->data()), payload->size(),
                                    std::chrono::steady_clock::now() + budget));
  if (!receive_.started()) return Status::Ok();
  Status opened = receive_.OpenPayload(header_bytes, payload);
  return opened.ok() ? opened : opened.WithContext(Where(peer_));
}

Status Connection::ReceiveFrame(wire::FrameHeader* header, std::string* payload) {
  uint8_t bytes[wire::kHeaderBytes];
  FT_RETURN_IF_ERROR(ReceiveBytesBy(bytes, sizeof(bytes), std::chrono::steady_clock::now() + io_timeout_));
  Status parsed = wire::ParseHeader(bytes, header);
  if (!parsed.ok()) return parsed.WithContext(Where(peer_));
  // Control frames only here: a data frame this early is a confused peer, not 64 MiB to buffer.
  if (header->type == wire::MessageType::kData)
    return Status::Corrupt(fmt::format("{} sent data unasked", Where(peer_)));
  // Before the peer proved the secret, nothing it says needs more than a nonce or an error.
  if (!receive_.started() && header->length > wire::kMaxPreAuthPayload)
    return Status::Corrupt(fmt::format("{} sent a {} frame of {} bytes before authenticating (at most {})",
                                       Where(peer_), wire::MessageTypeName(header->type), header->length,
                                       wire::kMaxPreAuthPayload));
  return ReceivePayload(bytes, *header, payload);
}

void Connection::Close() {
  if (fd_ < 0) return;
  (void)SendFrame(wire::EncodeClose());
  close(fd_);
  fd_ = -1;
}

void Connection::Abort() {
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

Status Stat(const PullOptions& options, const Peer& peer, const std::string& name, RegionInfo* out) {
  std::unique_ptr<Connection> connection;
  FT_RETURN_IF_ERROR(Connection::Open(options, peer, &connection));
  wire::OpenReply reply;
  FT_RETURN_IF_ERROR(connection->OpenRegion(name, &reply));
  connection->Close();
  out->size = reply.size;
  out->meta = std::move(reply.meta);
  return Status::Ok();
}

}  // namespace ft::rdma

// ft::rdma::Server over Boost.Asio. One Session per accepted connection, all its handlers on
// one strand, one request at a time: read a frame, answer it, read the next. Clients pipeline
// their Read requests, so the next requests wait in the socket while a piece is being sent and
// the pipe never drains. A piece goes out as one gathered write of a 32-byte prefix and the
// region's own bytes (no copy).
//
// Before a peer has proven the secret it can send exactly Hello, then Response; anything else,
// a wrong MAC or the handshake deadline ends the connection with AuthRefused and nothing about
// the node's regions. After it every frame both ways is sealed with the session's keys
// (transfer_engine/channel.h); one that fails to open ends the connection.
//
// Connections are capped (admission.h), never above a quarter of the process's descriptor limit.
#include <fmt/format.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "transfer_engine/auth.h"
#include "transfer_engine/channel.h"
#include "transfer_engine/tcp/admission.h"
#include "transfer_engine/tcp/socket_tuning.h"
#include "transfer_engine/transfer.h"
#include "transfer_engine/wire.h"

namespace ft::rdma {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxOpenRegions = 64;
constexpr auto kLinger = std::chrono::milliseconds(2000);
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
constexpr auto kAcceptWarningInterval = std::chrono::seconds(10);

// async_write's default completion condition (transfer_all) hands the kernel at most 64 KiB per
// writev: 64 system calls and 64 short pushes for one 4 MiB piece, which cost more CPU than the
// copy itself on a fast link. This one lets each writev offer everything that is left.
std::size_t TransferAllInLargeWrites(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : wire::MaxPayload(wire::MessageType::kData) + wire::kHeaderBytes;
}

}  // namespace

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  ServerOptions options;
  // Declared before io: sessions that io's handlers still own release here.
  Admission admission;
  std::atomic<uint64_t> forged{0};

  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  // The acceptor's handlers and Stop()'s close run on one strand: an acceptor is not safe for
  // concurrent use.
  asio::strand<asio::io_context::executor_type> accept_strand{asio::make_strand(io)};
  std::optional<tcp::acceptor> acceptor;
  asio::steady_timer accept_retry{accept_strand};  // on accept_strand, like the acceptor
  Clock::time_point last_accept_warning{};
  std::vector<std::thread> threads;
  uint16_t bound_port = 0;
  bool started = false;

  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> reads{0};

  class Session;
  Mutex sessions_mu;
  std::vector<std::weak_ptr<Session>> sessions GUARDED_BY(sessions_mu);
  bool stopping GUARDED_BY(sessions_mu) = false;

  void Accept();
};

class Server::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Impl* server, tcp::socket socket)
      : server_(server),
        strand_(asio::make_strand(server->io)),
        socket_(std::move(socket)),
        timer_(strand_) {
    boost::system::error_code ec;
    tcp::endpoint remote = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("unknown") : remote.address().to_string();
  }
  ~Session() {
    if (admitted_) server_->admission.Release(peer_, state_ == State::kAuthenticated);
  }
  const std::string& peer() const { return peer_; }
  // Counted against the caps (Admission::Admit); released when the session ends.
  void Admitted() { admitted_ = true; }

  void Start() {
    TuneSocket(socket_.native_handle(), SocketRole::kServer);
    asio::dispatch(strand_, [self = shared_from_this()] {
      self->ArmTimer(self->server_->options.handshake_timeout);
      self->ReadHeader();
    });
  }

  // From any thread: ends the connection (Server::Stop).
  void Close() {
    asio::post(strand_, [self = shared_from_this()] { self->Shutdown(); });
  }

 private:
  enum class State { kExpectHello, kExpectResponse, kAuthenticated };

  void Shutdown() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // Our own side failed (the handshake's randomness, sealing): nothing to tell the peer.
  void Broken(std::string_view doing, const Status& s) {
    FT_LOG(Error, Rdma, "{} {} failed: {}", doing, peer_, s.ToString());
    Shutdown();
  }

  void ArmTimer(std::chrono::milliseconds after) {
    if (closed_) return;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), generation = ++timer_generation_](
                          boost::system::error_code ec) {
      if (ec || self->closed_ || generation != self->timer_generation_) return;
      if (self->lingering_) {
        self->Shutdown();
      } else if (self->state_ != State::kAuthenticated) {
        self->Refuse("no valid response before the handshake deadline");
      } else {
        FT_LOG(Debug, Rdma, "closing idle transfer connection from {}", self->peer_);
        self->Shutdown();
      }
    });
  }

  // Asio allows one read at a time per socket: every read goes through here, and a read that
  // completes after the connection began to linger (a deadline fired while it waited) hands
  // over to Drain instead of being parsed.
  template <typename Then>
  void AsyncRead(asio::mutable_buffer buffer, Then then) {
    read_pending_ = true;
    asio::async_read(socket_, buffer,
                     asio::bind_executor(strand_, [self = shared_from_this(), then](
                                                      boost::system::error_code ec, size_t) {
                       self->read_pending_ = false;
                       if (self->closed_) return;
                       // Refused or failed with the last frame still being written: that
                       // write's completion (Linger) may reach the strand after this read's, so
                       // the frame is done with here already, not parsed.
                       if (self->lingering_ || self->ending_) return ec ? self->Shutdown() : self->Drain();
                       then(self.get(), ec);
                     }));
  }

  void ReadHeader() {
    if (closed_ || lingering_) return;
    AsyncRead(asio::buffer(header_), [](Session* self, boost::system::error_code ec) { self->OnHeader(ec); });
  }

  void OnHeader(boost::system::error_code ec) {
    if (closed_) return;
    if (ec) return Shutdown();  // the peer went away
    wire::FrameHeader header;
    Status parsed = wire::ParseHeader(header_.data(), &header);
    if (!parsed.ok()) {
      // A peer speaking another version learns that much (a rolling upgrade must be told
      // clearly), in its own version's framing when that one shipped before ours, and nothing
      // else: it is still refused.
      if (state_ != State::kAuthenticated && parsed.code() == StatusCode::kUnsupported)
        return Refuse(parsed.message(),
                      wire::EncodeVersionRefusal(wire::FrameVersion(header_.data()), parsed.message()));
      if (state_ != State::kAuthenticated) return Refuse(parsed.message());
      return Fail(parsed.code() == StatusCode::kUnsupported ? wire::ErrorCode::kUnsupportedVersion
                                                            : wire::ErrorCode::kProtocol,
                  0, std::string(parsed.message()));
    }
    // Before authentication only the next handshake message is read at all: an unauthenticated
    // peer cannot make us allocate more than a nonce.
    wire::MessageType expected = state_ == State::kExpectHello ? wire::MessageType::kHello
                                                               : wire::MessageType::kResponse;
    if (state_ != State::kAuthenticated && header.type != expected)
      return Refuse(fmt::format("sent {} before authenticating", wire::MessageTypeName(header.type)));
    // After it, only what a client sends: a frame of a server's type is refused on its header,
    // before a payload of up to 64 MiB is read for nothing.
    if (state_ == State::kAuthenticated && header.type != wire::MessageType::kOpen &&
        header.type != wire::MessageType::kFastConnect && header.type != wire::MessageType::kRead &&
        header.type != wire::MessageType::kClose)
      return Fail(wire::ErrorCode::kProtocol, 0,
                  fmt::format("a client does not send {}", wire::MessageTypeName(header.type)));
    type_ = header.type;
    payload_.resize(header.length);
    if (header.length == 0) return OnPayload({});
    AsyncRead(asio::buffer(payload_), [](Session* self, boost::system::error_code ec) { self->OnPayload(ec); });
  }

  void OnPayload(boost::system::error_code ec) {
    if (closed_) return;
    if (ec) return Shutdown();
    if (state_ == State::kAuthenticated) {
      // Sealed by the client with this session's key as its next message, or not from it.
      Status opened = receive_.OpenPayload(header_.data(), &payload_);
      if (!opened.ok()) return Forged(opened.message());
      ArmTimer(server_->options.idle_timeout);
    }
    switch (type_) {
      case wire::MessageType::kHello: return OnHello();
      case wire::MessageType::kResponse: return OnResponse();
      case wire::MessageType::kOpen: return OnOpen();
      case wire::MessageType::kFastConnect: return OnFastConnect();
      case wire::MessageType::kRead: return OnRead();
      case wire::MessageType::kClose: return Shutdown();
      default:
        return Fail(wire::ErrorCode::kProtocol, 0,
                    fmt::format("a client does not send {}", wire::MessageTypeName(type_)));
    }
  }

  void OnHello() {
    wire::Hello hello;
    Status s = wire::DecodeHello(payload_, &hello);
    if (!s.ok()) return Refuse(s.message());
    client_nonce_ = hello.client_nonce;
    s = auth::RandomNonce(&server_nonce_);
    if (!s.ok()) return Broken("transfer handshake with", s);
    state_ = State::kExpectResponse;
    Send(wire::EncodeChallenge({server_nonce_}), [](Session* self) { self->ReadHeader(); });
  }

  void OnResponse() {
    wire::Response response;
    Status s = wire::DecodeResponse(payload_, &response);
    if (!s.ok()) return Refuse(s.message());
    if (!auth::VerifyMac(server_->options.secret, auth::Role::kClient, server_nonce_,
                         client_nonce_, response.mac))
      return Refuse("wrong secret (its response does not match this job's)");
    const std::string& secret = server_->options.secret;
    s = send_.Start(auth::DeriveKey(secret, auth::Role::kServer, server_nonce_, client_nonce_), true);
    if (s.ok()) s = receive_.Start(auth::DeriveKey(secret, auth::Role::kClient, server_nonce_, client_nonce_), false);
    if (!s.ok()) return Broken("transfer handshake with", s);
    state_ = State::kAuthenticated;
    if (admitted_) server_->admission.Authenticated(peer_);
    ArmTimer(server_->options.idle_timeout);
    wire::AuthOk ok{auth::ComputeMac(secret, auth::Role::kServer, server_nonce_, client_nonce_)};
    Send(wire::EncodeAuthOk(ok), [](Session* self) { self->ReadHeader(); }, /*seal=*/false);
  }

  // A frame that does not open with the session's key: someone else wrote it (a hijack, an
  // injection on the path) or a broken peer. Nothing is answered: an answer would be sealed
  // to the real peer, whose stream is no longer in step anyway.
  void Forged(std::string_view why) {
    server_->forged.fetch_add(1, std::memory_order_relaxed);
    server_->admission.NoteRefused(peer_, fmt::format("a frame of its authenticated session failed: {}; closed", why));
    Shutdown();
  }

  void OnOpen() {
    wire::Open open;
    Status s = wire::DecodeOpen(payload_, &open);
    if (!s.ok()) return Fail(wire::ErrorCode::kProtocol, 0, std::string(s.message()));
    if (regions_.size() >= kMaxOpenRegions)
      return Fail(wire::ErrorCode::kTooManyOpen, 0,
                  fmt::format("at most {} regions per connection", kMaxOpenRegions));
    std::shared_ptr<const Region> region;
    s = server_->options.provider ? server_->options.provider->Open(open.name, &region)
                                  : Status::NotFound("this server has no regions");
    if (!s.ok()) {
      wire::ErrorCode code = s.code() == StatusCode::kNotFound   ? wire::ErrorCode::kNotFound
                             : s.code() == StatusCode::kNotReady ? wire::ErrorCode::kNotReady
                                                                 : wire::ErrorCode::kInternal;
      // Not fatal: the client may ask for another name on the same connection.
      return Reply(wire::EncodeError({code, 0, fmt::format("{}: {}", open.name, s.message())}));
    }
    if (region->meta().size() > kMaxMetaBytes) {
      return Reply(wire::EncodeError({wire::ErrorCode::kInternal, 0,
                                      fmt::format("{}: meta of {} bytes is above the limit",
                                                  open.name, region->meta().size())}));
    }
    wire::OpenReply reply;
    reply.handle = static_cast<uint32_t>(regions_.size());
    reply.size = region->size();
    reply.meta = std::string(region->meta());
    // Only the connection that will exchange the fast-path connect asks for the offer; the
    // plain data connections of the same pull do not make the fast path describe itself again.
    if (server_->options.fast_path && (open.flags & wire::kOpenWantsFastPath)) {
      reply.offer = server_->options.fast_path->Offer(*region);
      if (reply.offer.size() > wire::kMaxOfferBytes) reply.offer.clear();
    }
    regions_.push_back(std::move(region));
    encrypt_data_.push_back((open.flags & wire::kOpenEncryptData) != 0);
    Reply(wire::EncodeOpenReply(reply));
  }

  void OnFastConnect() {
    wire::FastConnect connect;
    Status s = wire::DecodeFastConnect(payload_, &connect);
    if (!s.ok()) return Fail(wire::ErrorCode::kProtocol, 0, std::string(s.message()));
    if (connect.handle >= regions_.size())
      return Fail(wire::ErrorCode::kBadHandle, 0, fmt::format("no open region {}", connect.handle));
    FastPathServer* fast = server_->options.fast_path;
    std::string reply;
    s = fast ? fast->Accept(*regions_[connect.handle], connect.request, &reply)
             : Status::Unavailable("this server offers no fast path");
    if (s.ok() && reply.size() > wire::kMaxOfferBytes)
      s = Status::Internal("fast-path reply above the limit");
    if (!s.ok())
      return Reply(wire::EncodeError({wire::ErrorCode::kNoFastPath, 0, std::string(s.message())}));
    Reply(wire::EncodeFastConnectReply({std::move(reply)}));
  }

  void OnRead() {
    wire::Read read;
    Status s = wire::DecodeRead(payload_, &read);
    if (!s.ok()) return Fail(wire::ErrorCode::kProtocol, 0, std::string(s.message()));
    if (read.handle >= regions_.size())
      return Fail(wire::ErrorCode::kBadHandle, read.tag, fmt::format("no open region {}", read.handle));
    const std::shared_ptr<const Region>& region = regions_[read.handle];
    if (read.offset > region->size() || read.len > region->size() - read.offset)
      return Fail(wire::ErrorCode::kOutOfRange, read.tag,
                  fmt::format("[{}, +{}) is outside the region's {} bytes", read.offset, read.len,
                              region->size()));
    // A newer save may overwrite the arena: never hand out bytes that may be torn.
    if (!region->StillValid())
      return Fail(wire::ErrorCode::kNotReady, read.tag, "the copy changed since it was opened");
    // header | sealed data header | its tag | the bytes (encrypted when asked) | [their tag]
    const bool encrypt = encrypt_data_[read.handle];
    wire::EncodeDataPrefix({read.tag, read.offset, read.len}, prefix_.data());
    wire::EncodeHeader(wire::MessageType::kData,
                       static_cast<uint32_t>(wire::kDataHeaderBytes + wire::kTagBytes + read.len +
                                             (encrypt ? wire::kTagBytes : 0)),
                       prefix_.data());
    uint8_t* data_header = prefix_.data() + wire::kHeaderBytes;
    s = send_.Begin(std::string_view(reinterpret_cast<const char*>(prefix_.data()), wire::kHeaderBytes));
    if (s.ok()) s = send_.Update(data_header, data_header, wire::kDataHeaderBytes);
    if (s.ok()) s = send_.FinishSeal(data_header + wire::kDataHeaderBytes);
    const uint8_t* body = region->data() + read.offset;
    if (s.ok() && encrypt) {
      sealed_.resize(read.len);
      s = send_.Begin({});
      if (s.ok()) s = send_.Update(body, sealed_.data(), read.len);
      if (s.ok()) s = send_.FinishSeal(body_tag_.data());
      body = sealed_.data();
    }
    if (!s.ok()) return Broken("sealing a piece for", s);
    std::array<asio::const_buffer, 3> buffers{asio::buffer(prefix_), asio::buffer(body, read.len),
                                              asio::buffer(body_tag_.data(), encrypt ? wire::kTagBytes : 0)};
    write_pending_ = true;
    asio::async_write(
        socket_, buffers, TransferAllInLargeWrites,
        asio::bind_executor(strand_, [self = shared_from_this(), read, region](
                                         boost::system::error_code ec, size_t) {
          self->write_pending_ = false;
          if (self->closed_) return;
          if (ec) return self->Shutdown();
          // reads first, bytes_sent with release: whoever sees the bytes sees the read too.
          self->server_->reads.fetch_add(1, std::memory_order_relaxed);
          self->server_->bytes_sent.fetch_add(read.len, std::memory_order_release);
          if (!region->StillValid())
            return self->Fail(wire::ErrorCode::kNotReady, read.tag,
                              "the copy changed while this piece was sent: trust it only if it verifies");
          self->ReadHeader();
        }));
  }

  // Answers and reads the next request.
  void Reply(std::string frame) {
    Send(std::move(frame), [](Session* self) { self->ReadHeader(); });
  }

  // An authenticated peer's bad request: say why, then close.
  void Fail(wire::ErrorCode code, uint64_t tag, std::string text) {
    FT_LOG(Debug, Rdma, "transfer request from {} refused ({}): {}", peer_,
           wire::ErrorCodeName(code), text);
    if (write_pending_) return Shutdown();  // one write at a time: no room to say why
    ending_ = true;
    Send(wire::EncodeError({code, tag, std::move(text)}), [](Session* self) { self->Linger(); });
  }

  // An unauthenticated peer: one frame saying no, nothing else, then close.
  void Refuse(std::string_view why, std::string frame = wire::EncodeAuthRefused()) {
    if (refused_ || write_pending_) return Shutdown();
    refused_ = true;
    ending_ = true;
    server_->admission.NoteRefused(peer_, why);
    Send(std::move(frame), [](Session* self) { self->Linger(); });
  }

  // Ends a connection whose last frame must reach the peer. Closing at once with the peer's
  // pipelined requests unread would make the kernel answer with RST, and an RST discards what
  // the peer has not read yet — our last frame included. So: stop sending, read and drop
  // whatever still comes until the peer closes, for at most kLinger.
  void Linger() {
    if (closed_) return;
    lingering_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    ArmTimer(kLinger);
    if (!read_pending_) Drain();  // else the read in flight hands over to Drain when it completes
  }

  void Drain() {
    if (closed_) return;
    read_pending_ = true;
    socket_.async_read_some(asio::buffer(drain_),
                            asio::bind_executor(strand_, [self = shared_from_this()](
                                                             boost::system::error_code ec, size_t) {
                              self->read_pending_ = false;
                              if (ec) return self->Shutdown();
                              self->Drain();
                            }));
  }

  // After the handshake the frame is sealed first (seal=false only for auth-ok itself).
  template <typename Then>
  void Send(std::string frame, Then then, bool seal = true) {
    if (closed_) return;
    if (seal && send_.started()) {
      Status s = send_.SealFrame(&frame);
      if (!s.ok()) return Broken("sealing a frame for", s);
    }
    out_ = std::move(frame);
    write_pending_ = true;
    asio::async_write(socket_, asio::buffer(out_),
                      asio::bind_executor(strand_, [self = shared_from_this(), then](
                                                       boost::system::error_code ec, size_t) {
                        self->write_pending_ = false;
                        if (self->closed_) return;
                        if (ec) return self->Shutdown();
                        then(self.get());
                      }));
  }

  Impl* server_;
  asio::strand<asio::io_context::executor_type> strand_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::string peer_;
  State state_ = State::kExpectHello;
  bool closed_ = false;
  bool refused_ = false;
  bool lingering_ = false;
  bool ending_ = false;  // a last frame (refusal, error) is on its way: nothing more is parsed
  bool admitted_ = false;
  bool read_pending_ = false;   // Asio: at most one read
  bool write_pending_ = false;  // and one write in flight per socket
  Sealer send_;                 // after the handshake: this side's frames
  Sealer receive_;              // and the client's
  std::vector<uint8_t> sealed_;  // an encrypted piece on its way out
  std::array<uint8_t, wire::kTagBytes> body_tag_{};
  std::array<uint8_t, 4096> drain_{};
  uint64_t timer_generation_ = 0;
  std::array<uint8_t, wire::kHeaderBytes> header_{};
  wire::MessageType type_ = wire::MessageType::kClose;
  std::string payload_;
  std::string out_;
  std::array<uint8_t, wire::kHeaderBytes + wire::kDataHeaderBytes + wire::kTagBytes> prefix_{};
  wire::Nonce client_nonce_{};
  wire::Nonce server_nonce_{};
  std::vector<std::shared_ptr<const Region>> regions_;  // index = handle
  std::vector<bool> encrypt_data_;                      // index = handle: kOpenEncryptData
};

void Server::Impl::Accept() {
  acceptor->async_accept(io, [this](boost::system::error_code ec,
                                                        tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec) {
      connections.fetch_add(1, std::memory_order_relaxed);
      auto session = std::make_shared<Session>(this, std::move(socket));
      if (!admission.Admit(session->peer())) {
        session.reset();  // closes the socket: over a cap, it holds no descriptor
        Accept();
        return;
      }
      session->Admitted();
      {
        MutexLock lock(&sessions_mu);
        if (stopping) return;  // Stop() took its list of sessions to close already
        std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
        sessions.push_back(session);
      }
      session->Start();
      Accept();
      return;
    }
    // Out of file descriptors (a flood of connections, a leak elsewhere in the process): the
    // error repeats at once until one closes, so pause instead of spinning, and say it rarely.
    Clock::time_point now = Clock::now();
    if (now - last_accept_warning >= kAcceptWarningInterval) {
      FT_LOG(Warn, Rdma,
             "accepting a transfer connection failed: {}; retrying every {} ms. If it says too "
             "many open files, raise the worker's descriptor limit (ulimit -n)",
             ec.message(), kAcceptRetry.count());
      last_accept_warning = now;
    }
    accept_retry.expires_after(kAcceptRetry);
    accept_retry.async_wait([this](boost::system::error_code wait_ec) {
      if (!wait_ec && acceptor->is_open()) Accept();
    });
  });
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { Stop(); }

Status Server::Start() {
  Impl& s = *impl_;
  if (s.started) return Status::InvalidArgument("transfer server already started");
  if (s.options.listen_address.empty())
    return Status::InvalidArgument(
        "transfer server: no listen address (set FT_LISTEN to this node's cluster address; "
        "0.0.0.0 only if every interface should serve)");
  if (s.options.secret.empty())
    return Status::InvalidArgument("transfer server: no job secret; refusing to serve unauthenticated");
  FT_RETURN_IF_ERROR(auth::CheckSecret(s.options.secret).WithContext("transfer server"));
  FT_RETURN_IF_ERROR(s.admission.SetCaps(s.options.max_connections, s.options.max_unauthenticated_per_address));
  if (s.options.io_threads < 1) return Status::InvalidArgument("transfer server: io_threads < 1");

  boost::system::error_code ec;
  tcp::resolver resolver(s.io);
  auto endpoints = resolver.resolve(s.options.listen_address, std::to_string(s.options.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty())
    return Status::InvalidArgument(fmt::format("transfer server: cannot resolve listen address {}: {}",
                                               s.options.listen_address, ec.message()));
  tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor acceptor(s.accept_strand);
  if (acceptor.open(endpoint.protocol(), ec) ||
      acceptor.set_option(tcp::acceptor::reuse_address(true), ec) || acceptor.bind(endpoint, ec) ||
      acceptor.listen(asio::socket_base::max_listen_connections, ec)) {
    return Status::FromErrno(ec.value(), fmt::format("transfer server: listening on {}:{}",
                                                     s.options.listen_address, s.options.port));
  }
  s.bound_port = acceptor.local_endpoint(ec).port();
  s.acceptor.emplace(std::move(acceptor));
  s.work.emplace(s.io.get_executor());
  s.Accept();
  for (int i = 0; i < s.options.io_threads; ++i) s.threads.emplace_back([&s] { s.io.run(); });
  s.started = true;
  FT_LOG(Info, Rdma, "serving transfers on {}:{} ({} I/O threads, at most {} connections, {} "
         "authenticating, {} of them per address{})", endpoint.address().to_string(),
         s.bound_port, s.options.io_threads, s.admission.max_connections(), s.admission.max_unauthenticated(),
         s.options.max_unauthenticated_per_address,
         s.options.fast_path ? fmt::format(", fast path {}", s.options.fast_path->kind()) : "");
  return Status::Ok();
}

uint16_t Server::port() const { return impl_->bound_port; }

void Server::Stop() {
  Impl& s = *impl_;
  if (!s.started) return;
  s.started = false;
  asio::post(s.accept_strand, [&s] {
    boost::system::error_code ignored;
    s.acceptor->close(ignored);
    s.accept_retry.cancel();
  });
  {
    MutexLock lock(&s.sessions_mu);
    s.stopping = true;
    for (const auto& weak : s.sessions)
      if (auto session = weak.lock()) session->Close();
    s.sessions.clear();
  }
  s.work.reset();  // run() returns once the closed sessions' handlers have drained
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
}

ServerStats Server::stats() const {
  const Impl& s = *impl_;
  ServerStats out;
  out.connections = s.connections.load(std::memory_order_relaxed);
  out.auth_refused = s.admission.auth_refused();
  out.bytes_sent = s.bytes_sent.load(std::memory_order_acquire);
  out.reads = s.reads.load(std::memory_order_relaxed);
  out.over_limit = s.admission.over_limit();
  out.forged = s.forged.load(std::memory_order_relaxed);
  out.refusal_log_addresses = s.admission.refusal_log_addresses();
  return out;
}

}  // namespace ft::rdma

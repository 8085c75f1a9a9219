// ft::rdma::Server over Boost.Asio. One Session per accepted connection, all its handlers on
// one strand, one request at a time: read a frame, answer it, read the next. Clients pipeline
// their Read requests, so the next requests wait in the socket while a piece is being sent and
// the pipe never drains. A piece goes out as one gathered write of a 32-byte prefix and the
// region's own bytes (no copy).
//
// Before a peer has proven the secret it can send exactly Hello, then Response; anything else,
// a wrong MAC or the handshake deadline ends the connection with AuthRefused and nothing about
// the node's regions.
#include <fmt/format.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/log.h"
#include "rdma/auth.h"
#include "rdma/socket_tuning.h"
#include "rdma/transfer.h"
#include "rdma/wire.h"

namespace ft::rdma {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxOpenRegions = 64;
constexpr auto kRefusalLogInterval = std::chrono::seconds(60);
constexpr auto kLinger = std::chrono::milliseconds(2000);
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
constexpr auto kAcceptWarningInterval = std::chrono::seconds(10);

// async_write's default completion condition (transfer_all) hands the kernel at most 64 KiB per
// writev: 64 system calls and 64 short pushes for one 4 MiB piece, which cost more CPU than the
// copy itself on a fast link. This one lets each writev offer everything that is left.
std::size_t TransferAllInLargeWrites(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : wire::kHeaderBytes + wire::kDataHeaderBytes + wire::kMaxReadBytes;
}

}  // namespace

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  ServerOptions options;
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
  std::atomic<uint64_t> auth_refused{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> reads{0};

  class Session;
  std::mutex sessions_mu;
  std::vector<std::weak_ptr<Session>> sessions;  // GUARDED_BY(sessions_mu)
  bool stopping = false;                          // GUARDED_BY(sessions_mu)

  // A scanner or a misconfigured job can knock thousands of times a minute: one line per
  // address per interval, with how many were not logged.
  struct RefusalLogState {
    Clock::time_point last{};
    uint64_t unlogged = 0;
  };
  std::mutex refusal_mu;
  std::map<std::string, RefusalLogState> refusal_log;  // GUARDED_BY(refusal_mu)

  void NoteRefused(const std::string& address, std::string_view why) {
    auth_refused.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(refusal_mu);
    RefusalLogState& state = refusal_log[address];
    Clock::time_point now = Clock::now();
    if (state.last != Clock::time_point{} && now - state.last < kRefusalLogInterval) {
      ++state.unlogged;
      return;
    }
    FT_LOG(Warn, Rdma,
           "refused transfer peer {}: {} ({} earlier refusals not logged); it gets nothing. Check "
           "that it belongs to this job and holds the job's transfer secret",
           address, why, state.unlogged);
    state.last = now;
    state.unlogged = 0;
  }

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

  void ReadHeader() {
    if (closed_ || lingering_) return;
    asio::async_read(socket_, asio::buffer(header_),
                     asio::bind_executor(strand_, [self = shared_from_this()](
                                                      boost::system::error_code ec, size_t) {
                       self->OnHeader(ec);
                     }));
  }

  void OnHeader(boost::system::error_code ec) {
    if (closed_) return;
    if (ec) return Shutdown();  // the peer went away
    wire::FrameHeader header;
    Status parsed = wire::ParseHeader(header_.data(), &header);
    if (!parsed.ok()) {
      // A peer speaking another version learns that much (a rolling upgrade must be told
      // clearly), and nothing else: it is still refused.
      if (state_ != State::kAuthenticated && parsed.code() == StatusCode::kUnsupported)
        return Refuse(parsed.message(), wire::EncodeError({wire::ErrorCode::kUnsupportedVersion, 0,
                                                           std::string(parsed.message())}));
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
    asio::async_read(socket_, asio::buffer(payload_),
                     asio::bind_executor(strand_, [self = shared_from_this()](
                                                      boost::system::error_code ec, size_t) {
                       self->OnPayload(ec);
                     }));
  }

  void OnPayload(boost::system::error_code ec) {
    if (closed_) return;
    if (ec) return Shutdown();
    if (state_ == State::kAuthenticated) ArmTimer(server_->options.idle_timeout);
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
    if (!s.ok()) {
      FT_LOG(Error, Rdma, "transfer handshake with {} failed: {}", peer_, s.ToString());
      return Shutdown();
    }
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
    state_ = State::kAuthenticated;
    ArmTimer(server_->options.idle_timeout);
    wire::AuthOk ok{auth::ComputeMac(server_->options.secret, auth::Role::kServer, server_nonce_,
                                     client_nonce_)};
    Send(wire::EncodeAuthOk(ok), [](Session* self) { self->ReadHeader(); });
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
    wire::EncodeDataPrefix({read.tag, read.offset, read.len}, prefix_.data());
    std::array<asio::const_buffer, 2> buffers{asio::buffer(prefix_),
                                              asio::buffer(region->data() + read.offset, read.len)};
    asio::async_write(
        socket_, buffers, TransferAllInLargeWrites,
        asio::bind_executor(strand_, [self = shared_from_this(), read, region](
                                         boost::system::error_code ec, size_t) {
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
    Send(wire::EncodeError({code, tag, std::move(text)}), [](Session* self) { self->Linger(); });
  }

  // An unauthenticated peer: one frame saying no, nothing else, then close.
  void Refuse(std::string_view why, std::string frame = wire::EncodeAuthRefused()) {
    if (refused_) return Shutdown();
    refused_ = true;
    server_->NoteRefused(peer_, why);
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
    Drain();
  }

  void Drain() {
    if (closed_) return;
    socket_.async_read_some(asio::buffer(drain_),
                            asio::bind_executor(strand_, [self = shared_from_this()](
                                                             boost::system::error_code ec, size_t) {
                              if (ec) return self->Shutdown();
                              self->Drain();
                            }));
  }

  template <typename Then>
  void Send(std::string frame, Then then) {
    if (closed_) return;
    out_ = std::move(frame);
    asio::async_write(socket_, asio::buffer(out_),
                      asio::bind_executor(strand_, [self = shared_from_this(), then](
                                                       boost::system::error_code ec, size_t) {
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
  std::array<uint8_t, 4096> drain_{};
  uint64_t timer_generation_ = 0;
  std::array<uint8_t, wire::kHeaderBytes> header_{};
  wire::MessageType type_ = wire::MessageType::kClose;
  std::string payload_;
  std::string out_;
  std::array<uint8_t, wire::kHeaderBytes + wire::kDataHeaderBytes> prefix_{};
  wire::Nonce client_nonce_{};
  wire::Nonce server_nonce_{};
  std::vector<std::shared_ptr<const Region>> regions_;  // index = handle
};

void Server::Impl::Accept() {
  acceptor->async_accept(io, [this](boost::system::error_code ec,
                                                        tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec) {
      connections.fetch_add(1, std::memory_order_relaxed);
      auto session = std::make_shared<Session>(this, std::move(socket));
      {
        std::lock_guard<std::mutex> lock(sessions_mu);
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
  FT_LOG(Info, Rdma, "serving transfers on {}:{} ({} I/O threads{})", endpoint.address().to_string(),
         s.bound_port, s.options.io_threads,
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
    std::lock_guard<std::mutex> lock(s.sessions_mu);
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
  out.auth_refused = s.auth_refused.load(std::memory_order_relaxed);
  out.bytes_sent = s.bytes_sent.load(std::memory_order_acquire);
  out.reads = s.reads.load(std::memory_order_relaxed);
  return out;
}

}  // namespace ft::rdma

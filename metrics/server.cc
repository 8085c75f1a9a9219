#include "metrics/server.h"

#include <atomic>
#include <optional>
#include <set>
#include <thread>
#include <utility>  // before Asio 1.74: its awaitable.hpp uses std::exchange under C++20

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "common/log.h"

namespace ft::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Status SplitHostPort(const std::string& address, std::string* host, uint16_t* port) {
  std::string h, p;
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return Status::InvalidArgument(fmt::format("metrics address '{}' is not [v6]:port", address));
    }
    h = address.substr(1, close - 1);
    p = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || address.find(':') != colon) {
      return Status::InvalidArgument(
          fmt::format("metrics address '{}' is not host:port (IPv6: [addr]:port)", address));
    }
    h = address.substr(0, colon);
    p = address.substr(colon + 1);
  }
  if (h.empty() || p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(p) > 65535) {
    return Status::InvalidArgument(fmt::format("metrics address '{}' needs a host and a port 0..65535", address));
  }
  *host = h;
  *port = static_cast<uint16_t>(std::stoul(p));
  return Status::Ok();
}

namespace {
class Session;
}  // namespace

struct Server::Impl {
  // Declared before io: the sessions that io_context's destructor frees still count down.
  ServerOptions options;
  RenderFn render;
  int connections = 0;  // only on the server's thread
  std::set<Session*> sessions;  // open ones, closed by Stop; only on the server's thread
  bool stopped = false;
  std::atomic<uint64_t> scrapes{0};
  std::string address;
  uint16_t port = 0;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;

  void Accept();
  // Closes the open connection that has waited longest for a request; false when none waits.
  bool EvictLongestWaiting();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl* server)
      : stream_(std::move(socket)), server_(server), buffer_(server->options.max_request_bytes) {
    ++server_->connections;
    server_->sessions.insert(this);
  }
  ~Session() {
    --server_->connections;
    server_->sessions.erase(this);
  }
  // Stop: the peer sees the connection end now, whatever was pending.
  void Close() { stream_.close(); }

  // Waiting for a request (idle keep-alive, or one arriving slowly), and since when.
  bool reading() const { return reading_; }
  std::chrono::steady_clock::time_point reading_since() const { return reading_since_; }

  void Read() {
    reading_ = true;
    reading_since_ = std::chrono::steady_clock::now();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_->options.max_request_bytes));
    parser_->body_limit(server_->options.max_request_bytes);
    stream_.expires_after(server_->options.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    reading_ = false;
    if (ec == http::error::header_limit || ec == http::error::body_limit ||
        ec == http::error::buffer_overflow) {
      Reply(http::status::request_header_fields_too_large, "request too large\n", 11, false);
      return;
    }
    if (ec) {  // the deadline, a closed connection, garbage: just close
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      return;
    }
    const auto& request = parser_->get();
    std::string_view target(request.target().data(), request.target().size());
    if (size_t q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
    const bool metrics = target == "/metrics";
    const auto route = metrics ? server_->options.routes.end() : server_->options.routes.find(std::string(target));
    if (!metrics && route == server_->options.routes.end()) {
      Reply(http::status::not_found, "not found: ft serves /metrics\n", request.version(), request.keep_alive());
    } else if (request.method() != http::verb::get) {
      Reply(http::status::method_not_allowed, "only GET\n", request.version(), request.keep_alive());
    } else if (metrics) {
      server_->scrapes.fetch_add(1, std::memory_order_relaxed);
      Reply(http::status::ok, server_->render(), request.version(), request.keep_alive(),
            "text/plain; version=0.0.4; charset=utf-8");
    } else {
      Reply(http::status::ok, route->second.render(), request.version(), request.keep_alive(),
            route->second.content_type);
    }
  }

  void Reply(http::status status, std::string body, unsigned version, bool keep_alive,
             const std::string& content_type = "text/plain") {
    auto response = std::make_shared<http::response<http::string_body>>(status, version);
    response->set(http::field::server, "ft");
    response->set(http::field::content_type, content_type);
    if (status == http::status::method_not_allowed) response->set(http::field::allow, "GET");
    response->keep_alive(keep_alive);
    response->body() = std::move(body);
    response->prepare_payload();
    stream_.expires_after(server_->options.read_timeout);
    http::async_write(stream_, *response,
                      [self = shared_from_this(), response, keep_alive](beast::error_code ec, size_t) {
                        if (!ec && keep_alive) {
                          self->Read();
                        } else {
                          beast::error_code ignored;
                          self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
                        }
                      });
  }

  beast::tcp_stream stream_;
  Server::Impl* server_;
  bool reading_ = false;
  std::chrono::steady_clock::time_point reading_since_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
};

}  // namespace

void Server::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (stopped || ec == asio::error::operation_aborted) return;
    if (!ec) {
      // Full: the connection that has waited longest for a request makes room (idle ones —
      // an old keep-alive, a client that connected and sent nothing — must not keep a scrape
      // out for read_timeout). Only when every one is being answered is the new one refused.
      if (connections >= options.max_connections && !EvictLongestWaiting()) {
        beast::error_code ignored;
        socket.close(ignored);
      } else {
        std::make_shared<Session>(std::move(socket), this)->Read();
      }
    }
    Accept();
  });
}

bool Server::Impl::EvictLongestWaiting() {
  Session* oldest = nullptr;
  for (Session* session : sessions) {
    if (session->reading() && (oldest == nullptr || session->reading_since() < oldest->reading_since())) {
      oldest = session;
    }
  }
  if (oldest == nullptr) return false;
  oldest->Close();  // its read ends with an error and the session goes (the count with it)
  return true;
}

Status Server::Start(ServerOptions options, RenderFn render, std::unique_ptr<Server>* out) {
  std::string host;
  uint16_t port = 0;
  FT_RETURN_IF_ERROR(SplitHostPort(options.address, &host, &port));
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->render = std::move(render);
  beast::error_code ec;
  tcp::resolver resolver(impl->io);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return Status::InvalidArgument(fmt::format("metrics address {}: cannot resolve '{}': {}",
                                               impl->options.address, host, ec.message()));
  }
  const tcp::endpoint endpoint = results.begin()->endpoint();
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable(fmt::format("metrics: cannot listen on {}: {}", impl->options.address, ec.message()));
  }
  const tcp::endpoint bound = impl->acceptor.local_endpoint(ec);
  impl->port = bound.port();
  impl->address = bound.address().is_v6() ? fmt::format("[{}]:{}", bound.address().to_string(), bound.port())
                                          : fmt::format("{}:{}", bound.address().to_string(), bound.port());
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  out->reset(new Server(std::move(impl)));
  return Status::Ok();
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

void Server::Stop() {
  if (!impl_->thread.joinable()) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    impl->stopped = true;
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    for (Session* session : impl->sessions) session->Close();
    impl->io.stop();
  });
  impl_->thread.join();
}

const std::string& Server::address() const { return impl_->address; }
uint16_t Server::port() const { return impl_->port; }
uint64_t Server::scrapes() const { return impl_->scrapes.load(std::memory_order_relaxed); }

}  // namespace ft::metrics

// ft::metrics::Server: serves GET /metrics in Prometheus' text format over HTTP/1.1 (Boost.Beast)
// on one thread of its own, and the owner's extra GET routes (ServerOptions::routes: ftmaster's
// live page) under the same limits. Anything else is answered 404 (another path) or 405 (another
// method).
// A hostile or slow client cannot hold it: a request must arrive whole within read_timeout (an
// idle keep-alive connection is closed after it too), a request larger than max_request_bytes is
// refused (431) and the connection closed, and at most max_connections are open at once: one more
// closes the connection that has waited longest for a request (idle clients never keep a scrape
// out), and is itself closed only when every open one is being answered.
//
// The server only renders: the owner updates the Registry on its own thread and `render` (called
// on the server's thread, once per scrape) must be thread-safe — Registry::Render is; so must each
// route's render.
#ifndef FT_METRICS_SERVER_H_
#define FT_METRICS_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"

namespace ft::metrics {

// An extra GET route: its Content-Type and its body, rendered on the server's thread per request
// (thread-safe). A failed render is the route's own business: it returns the page saying so.
struct Route {
  std::string content_type;
  std::function<std::string()> render;
};

struct ServerOptions {
  // "host:port" or "[v6]:port"; port 0 takes a free one (address() tells which).
  std::string address;
  std::chrono::milliseconds read_timeout{5000};
  size_t max_request_bytes = 8192;
  int max_connections = 16;
  // Exact paths (no query string) beside /metrics, which they cannot replace: "/", "/api/job.json".
  std::map<std::string, Route> routes;
};

// "127.0.0.1:9464" → host, port; "[::1]:0" too. A bad address is kInvalidArgument naming it.
Status SplitHostPort(const std::string& address, std::string* host, uint16_t* port);

class Server {
 public:
  using RenderFn = std::function<std::string()>;

  // Binds and starts the thread; kUnavailable (naming the address) if the bind fails.
  static Status Start(ServerOptions options, RenderFn render, std::unique_ptr<Server>* out);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Closes the listener and every connection and joins the thread; idempotent.
  void Stop();

  // The bound address, "127.0.0.1:9464" ("[::1]:9464" for IPv6).
  const std::string& address() const;
  uint16_t port() const;
  // GET /metrics answered 200, since Start (any thread).
  uint64_t scrapes() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft::metrics

#endif  // FT_METRICS_SERVER_H_

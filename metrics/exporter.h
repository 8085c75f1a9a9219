// ft::metrics::Exporter: what a daemon (ftworker, ftmaster) runs to be scraped — a Registry, the
// /metrics Server on FT_METRICS_LISTEN, and the FT_METRICS_TEXTFILE writer on a thread of its own
// (a disk never holds the daemon's loop). The daemon fills registry() from its own thread.
//
// Metrics are never worth stopping a daemon for: a listen address that cannot be bound or a
// textfile that cannot be written is logged (Warn, with what to do) and the daemon goes on. The
// program's default port taken (two jobs' daemons on one host) moves the server to a free port
// of the same host, logged with its address.
#ifndef FT_METRICS_EXPORTER_H_
#define FT_METRICS_EXPORTER_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "common/units.h"
#include "metrics/registry.h"
#include "metrics/server.h"

namespace ft::metrics {

// The default ports: 9464 ftworker, 9465 ftmaster (one host may run both).
inline constexpr uint16_t kWorkerPort = 9464;
inline constexpr uint16_t kMasterPort = 9465;

// FT_METRICS_LISTEN's value → "host:port": a host alone ("127.0.0.1", "[::1]", "localhost")
// takes `default_port`; "" stays "" (off).
std::string ListenAddress(const std::string& setting, uint16_t default_port);

struct ExporterOptions {
  std::string listen;            // FT_METRICS_LISTEN
  uint16_t default_port = kWorkerPort;
  std::string textfile;          // FT_METRICS_TEXTFILE; empty: none
  Duration interval = std::chrono::seconds(1);  // FT_METRICS_INTERVAL: textfile rewrites
  Subsystem subsystem = Subsystem::kWorker;     // where its log lines go
  std::map<std::string, Route> routes;          // served beside /metrics (ftmaster's page)
};

class Exporter {
 public:
  Exporter() = default;
  ~Exporter();  // Stop()
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Starts the server (logs "metrics: serving http://<addr>/metrics") and the textfile thread.
  // The Status is the server's (also logged); the textfile thread runs either way.
  Status Start(ExporterOptions options);
  // Stops the server; the textfile is written a last time. Idempotent.
  void Stop();

  Registry& registry() { return registry_; }
  // The bound address ("127.0.0.1:9464"), "" when not serving.
  std::string address() const { return server_ ? server_->address() : std::string(); }

 private:
  void TextfileLoop();
  void WriteTextfileOnce();

  ExporterOptions options_;
  Registry registry_;
  std::unique_ptr<Server> server_;
  std::thread textfile_thread_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool textfile_warned_ = false;  // the textfile thread only
};

}  // namespace ft::metrics

#endif  // FT_METRICS_EXPORTER_H_

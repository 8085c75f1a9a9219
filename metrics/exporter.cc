#include "metrics/exporter.h"

#include <fmt/format.h>

#include "common/mutex.h"
#include "metrics/textfile.h"

namespace ft::metrics {

std::string ListenAddress(const std::string& setting, uint16_t default_port) {
  if (setting.empty()) return "";
  const bool bracketed = setting.front() == '[';
  const size_t close = setting.find(']');
  // "[v6]" alone, or a host with no colon: no port given.
  if ((bracketed && close == setting.size() - 1) ||
      (!bracketed && setting.find(':') == std::string::npos)) {
    return fmt::format("{}:{}", setting, default_port);
  }
  return setting;
}

Exporter::~Exporter() { Stop(); }

Status Exporter::Start(ExporterOptions options) {
  options_ = std::move(options);
  Status status;
  const std::string address = ListenAddress(options_.listen, options_.default_port);
  if (address.empty()) {
    if (log::Enabled(options_.subsystem, LogLevel::kInfo)) {
      log::Write(options_.subsystem, LogLevel::kInfo, "metrics: no server (FT_METRICS_LISTEN is empty)");
    }
  } else {
    ServerOptions server_options;
    server_options.address = address;
    server_options.routes = options_.routes;
    status = Server::Start(server_options, [this] { return registry_.Render(); }, &server_);
    // The program's own port taken (a second job's master or worker on this host): it is still
    // worth scraping, so any free port on the same host, said where. A port the user gave is
    // theirs to fix.
    const bool default_port = address != options_.listen;
    if (!status.ok() && status.code() == StatusCode::kUnavailable && default_port) {
      server_options.address = options_.listen + ":0";
      Status fallback = Server::Start(server_options, [this] { return registry_.Render(); }, &server_);
      if (fallback.ok()) {
        if (log::Enabled(options_.subsystem, LogLevel::kWarn)) {
          log::Write(options_.subsystem, LogLevel::kWarn,
                     fmt::format("metrics: port {} is taken (another job's daemon on this host?): serving "
                                 "http://{}/metrics instead; set FT_METRICS_LISTEN to host:port for a fixed one",
                                 options_.default_port, server_->address()));
        }
        status = fallback;
      }
    }
    if (status.ok()) {
      if (log::Enabled(options_.subsystem, LogLevel::kInfo)) {
        log::Write(options_.subsystem, LogLevel::kInfo,
                   fmt::format("metrics: serving http://{}/metrics", server_->address()));
      }
    } else if (log::Enabled(options_.subsystem, LogLevel::kWarn)) {
      log::Write(options_.subsystem, LogLevel::kWarn,
                 fmt::format("metrics: not served: {}; set FT_METRICS_LISTEN to a free host:port "
                             "(port 0: any free one) or empty to turn the server off",
                             status.message()));
    }
  }
  if (!options_.textfile.empty()) textfile_thread_ = std::thread([this] { TextfileLoop(); });
  return status;
}

void Exporter::Stop() {
  if (server_) server_->Stop();
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (textfile_thread_.joinable()) textfile_thread_.join();
}

void Exporter::WriteTextfileOnce() {
  Status status = WriteTextfile(options_.textfile, registry_.Render());
  if (!status.ok() && !textfile_warned_) {
    textfile_warned_ = true;
    if (log::Enabled(options_.subsystem, LogLevel::kWarn)) {
      log::Write(options_.subsystem, LogLevel::kWarn,
                 fmt::format("metrics: cannot write FT_METRICS_TEXTFILE: {}; point it at a "
                             "writable file in node_exporter's textfile directory (said once)",
                             status.ToString()));
    }
  } else if (status.ok()) {
    textfile_warned_ = false;
  }
}

void Exporter::TextfileLoop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    lock.Unlock();
    WriteTextfileOnce();
    lock.Lock();
    cv_.WaitFor(&mu_, options_.interval, [this]() REQUIRES(mu_) { return stopping_; });
  }
  lock.Unlock();
  WriteTextfileOnce();  // the last figures
}

}  // namespace ft::metrics

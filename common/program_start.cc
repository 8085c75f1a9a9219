#include "common/program_start.h"

#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ft {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

}  // namespace

Status LoadProgramConfig(std::string_view program, Subsystem subsystem, const Environment& env, Config* config) {
  std::vector<std::string> warnings, not_settings;
  FT_RETURN_IF_ERROR(Config::Load(env, config, &warnings, &not_settings));
  if (Status s = log::Configure(config->log_level, config->log_subsystems); !s.ok()) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
                 std::string(s.message()).c_str());
  }
  if (log::Enabled(subsystem, LogLevel::kWarn)) {
    for (const auto& w : warnings) log::Write(subsystem, LogLevel::kWarn, w);
  }
  if (!not_settings.empty() && log::Enabled(subsystem, LogLevel::kInfo)) {
    log::Write(subsystem, LogLevel::kInfo,
               fmt::format("ignoring {} FT_* variable{} that name no ft setting (another program's?): {}",
                           not_settings.size(), not_settings.size() == 1 ? "" : "s", fmt::join(not_settings, ", ")));
  }
  return Status::Ok();
}

const std::atomic<bool>& StopOnSignals() {
  static const bool installed = [] {
    struct sigaction sa = {};
    sa.sa_handler = OnSignal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    return true;
  }();
  (void)installed;
  return g_stop;
}

}  // namespace ft

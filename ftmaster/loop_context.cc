#include "ftmaster/loop_context.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "ftmaster/loop_util.h"
#include "ftmaster/report.h"

namespace ft::master {

std::string DefaultMasterId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  return fmt::format("{}:{}:{:08x}", host, getpid(), rd());
}

LoopContext::LoopContext(MasterOptions o, std::unique_ptr<redis::Store> s)
    : options(std::move(o)),
      keys(options.job),
      store(std::move(s)),
      lease(keys.Leader(), options.id.empty() ? DefaultMasterId() : options.id,
            Ms(std::max<int64_t>(ToMs(options.config.lease), 30))),
      writer(store.get(), &keys, lease.id(), std::addressof(stats.fenced_out)) {}  // kept, read later (clang: &stats.x is a use)

void LoopContext::Print(const proto::Incident& incident, const std::vector<std::string>& evicted) {
  ++stats.incidents_written;
  if (options.out == nullptr) return;
  std::string text = IncidentBlock(incident, evicted);
  std::fwrite(text.data(), 1, text.size(), options.out);
  std::fflush(options.out);
}

}  // namespace ft::master

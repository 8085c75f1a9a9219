#include "ftmaster/prefetch_view.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

#include "ftmaster/core/text.h"

namespace ft::master {

std::string PrefetchText(const std::vector<proto::PrefetchReport>& reports, int64_t planned_step,
                         int64_t now_unix_ms) {
  if (reports.empty()) return "";
  std::string out = "prefetch on replacement nodes:\n";
  for (const proto::PrefetchReport& r : reports) {
    int ready = 0;
    uint64_t bytes = 0;
    std::map<std::string, int> outcomes;  // outcome's name -> ranks (in the names' order)
    std::set<std::string> sources, transports;
    for (const proto::PrefetchRank& rank : r.ranks) {
      ready += rank.ok ? 1 : 0;
      ++outcomes[proto::PrefetchOutcomeName(rank.outcome)];
      bytes += rank.bytes;
      if (rank.bytes > 0 && !rank.source.empty()) sources.insert(rank.source);
      if (rank.bytes > 0 && !rank.transport.empty()) transports.insert(rank.transport);
    }
    std::vector<std::string> counts;
    for (const auto& [outcome, n] : outcomes) counts.push_back(fmt::format("{} {}", n, outcome));
    std::string state = r.state == proto::PrefetchState::kDone
                            ? fmt::format("done in {}", HumanMs(1000 * r.pull_s))
                            : fmt::format("running for {}", HumanMs(static_cast<double>(now_unix_ms - r.started_unix_ms)));
    std::string line = fmt::format("  {}: {}, step {}: {} of {} rank{} ready ({})", r.node, state, r.step, ready,
                                   r.ranks.size(), r.ranks.size() == 1 ? "" : "s", fmt::join(counts, ", "));
    if (bytes > 0) {
      line += fmt::format("; {} pulled from {} over {}", HumanBytes(bytes), fmt::join(sources, ", "),
                          fmt::join(transports, ", "));
    }
    if (planned_step >= 0 && r.step != planned_step) {
      line += fmt::format(" — stale: the plan names step {}", planned_step);
    }
    out += line + "\n";
    for (const proto::PrefetchRank& rank : r.ranks) {
      if (rank.outcome != proto::PrefetchOutcome::kFailed) continue;
      out += fmt::format("    rank {} failed: {}; its restore reads another source\n", rank.rank,
                         rank.error.empty() ? "no reason given" : rank.error);
    }
  }
  return out;
}

}  // namespace ft::master

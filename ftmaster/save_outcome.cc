#include "ftmaster/save_outcome.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace ft::master {

SaveOutcome CountSaveOutcome(std::span<const SaveTarget> targets, const std::map<int, std::string>& results) {
  SaveOutcome o;
  for (const SaveTarget& t : targets) {
    ++o.shards;
    if (t.node.empty()) {
      ++o.unreachable;
      continue;
    }
    auto it = results.find(t.rank);
    if (it == results.end()) {
      ++o.unanswered;
    } else if (it->second == "done") {
      ++o.saved;
    } else if (it->second == "not_supported") {
      ++o.not_supported;
    } else {
      ++o.failed;
    }
  }
  return o;
}

std::string DescribeSaveOutcome(const SaveOutcome& o) {
  std::vector<std::string> why;
  if (o.not_supported > 0) {
    why.push_back(fmt::format("{} answered not_supported: this libft.so cannot checkpoint", o.not_supported));
  }
  if (o.failed > 0) why.push_back(fmt::format("{} failed", o.failed));
  if (o.unreachable > 0) {
    why.push_back(fmt::format("{} never asked: no node is known for the rank (no membership in Redis)",
                              o.unreachable));
  }
  if (o.unanswered > 0) why.push_back(fmt::format("{} did not answer by FT_SAVE_DEADLINE", o.unanswered));
  std::string text = fmt::format("saved {} of {} shard{}", o.saved, o.shards, o.shards == 1 ? "" : "s");
  if (!why.empty()) text += fmt::format(" ({})", fmt::join(why, "; "));
  if (o.saved == 0) {
    text += "; the job is stopped without a checkpoint";
  } else if (o.saved < o.shards) {
    text += "; the checkpoint is incomplete: restore from an earlier one";
  } else {
    text += "; the checkpoint is complete";
  }
  return text;
}

std::string EncodeSaveOutcome(const std::string& incident, const SaveOutcome& o) {
  return fmt::format(
      R"({{"v":1,"incident":"{}","shards":{},"saved":{},"not_supported":{},"failed":{},"unreachable":{},"unanswered":{}}})",
      incident, o.shards, o.saved, o.not_supported, o.failed, o.unreachable, o.unanswered);
}

}  // namespace ft::master

// `ftmaster timeouts`, `evicted`, `save` and `stacks` (cli.h); status, incidents and
// checkpoints have a file each.
#include "ftmaster/cli/cli.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <set>
#include <thread>

#include "ftmaster/action_runner.h"
#include "ftmaster/cli/cli_util.h"
#include "ftmaster/core/text.h"
#include "ftmaster/store.h"
#include "proto/keys.h"
#include "schema/master_hash.h"
#include "schema/node_sets.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"
#include "schema/streams.h"

namespace ft::master {
namespace {

using cli::Age;
using cli::Json;
using cli::Run;

}  // namespace

Status TimeoutsCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, schema::GetTimeouts(keys), &reply));
  if (!reply.is_string()) {
    if (o.json) {
      *out += "null\n";
    } else {
      *out += fmt::format("no timeouts published for job {} yet (workers use FT_TIMEOUT_WARMUP)\n",
                          o.job);
    }
    return Status::Ok();
  }
  proto::TimeoutTable table;
  FT_RETURN_IF_ERROR(proto::Decode(reply.str(), &table).WithContext(keys.Timeouts()));
  if (o.json) {
    *out += proto::Encode(table);
    *out += "\n";
    return Status::Ok();
  }
  *out += fmt::format("timeouts version {} (published {}): default {}, {} entr{}\n", table.version,
                      Age(o.now_unix_ms, table.unix_ms), HumanMs(table.default_ms),
                      table.entries.size(), table.entries.size() == 1 ? "y" : "ies");
  if (table.entries.empty()) return Status::Ok();
  *out += fmt::format("{:<16}  {:<14}  {:>6}  {:>10}\n", "COMM", "OP", "BUCKET", "TIMEOUT");
  for (const proto::TimeoutEntry& e : table.entries) {
    *out += fmt::format("{:<16}  {:<14}  {:>6}  {:>10}\n", CommHex(e.comm_id), proto::OpKindName(e.op), e.bucket,
                        HumanMs(e.ms));
  }
  return Status::Ok();
}

Status EvictedCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, schema::GetEvicted(keys), &reply));
  const std::set<std::string> nodes = schema::DecodeNodes(reply);
  if (o.json) {
    *out += Json(nodes).dump();
    *out += "\n";
    return Status::Ok();
  }
  if (nodes.empty()) *out += fmt::format("no nodes evicted for job {}\n", o.job);
  // Each node's reason, where the master recorded one (`evicted_why:<node>` in its hash).
  for (const std::string& n : nodes) {
    redis::Reply why;
    const bool known = Run(client, schema::master_hash::Get(keys, schema::master_hash::EvictedWhy(n)), &why).ok() && why.is_string();
    *out += known ? fmt::format("{}  {}\n", n, why.str()) : n + "\n";
  }
  return Status::Ok();
}

Status SaveCommand(redis::Commands& client, const CliOptions& o, std::string* out) {
  proto::Keys keys(o.job);
  redis::Reply members;
  FT_RETURN_IF_ERROR(Run(client, schema::GetWorkers(keys), &members));
  const std::set<std::string> nodes = schema::DecodeNodes(members);
  if (nodes.empty()) {
    return Status::NotFound(fmt::format("no workers have registered for job {} ({} is empty)", o.job,
                                        keys.Workers()));
  }
  // For the processes started before this request, named by its time and not by the
  // membership's incarnations: a worker that replays its stream later (its cursor lost) must not
  // make a relaunch of theirs save, but the membership lags a restart in place by a report, and
  // a request naming the processes before it reached one node's ranks only (the campaign's seed
  // 14: half a save, which cost the only whole step later). Its workers run it for every
  // process of theirs started before `decided_unix_ms` (CommandStaleness).
  // One id for the request: each worker passes it to its ranks, whose acks name it.
  const std::string id = fmt::format("{}-save-at-step", o.now_unix_ms);
  for (const std::string& node : nodes) {
    proto::Command command;
    command.id = id + "-" + node;
    command.kind = proto::CommandKindName(proto::CommandKind::kSaveAtStep);
    command.rank = -1;
    command.text = id;
    command.unix_ms = o.now_unix_ms;
    command.decided_unix_ms = o.now_unix_ms;
    redis::Reply added;
    FT_RETURN_IF_ERROR(Run(client, schema::PostCommand(keys, node, command), &added));
  }
  if (o.json) {
    Json j = Json::object();
    j["id"] = id;
    j["nodes"] = Json(std::vector<std::string>(nodes.begin(), nodes.end()));
    *out += j.dump();
    *out += "\n";
    return Status::Ok();
  }
  *out += fmt::format("save requested: {} (sent to {} node{}); every rank saves at its next step "
                      "boundary — see `ftmaster checkpoints`\n",
                      id, nodes.size(), nodes.size() == 1 ? "" : "s");
  return Status::Ok();
}

bool ParseRankFlag(const std::string& text, int* rank) {
  int v = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < 0) return false;
  *rank = v;
  return true;
}

Status StacksCommand(redis::Commands& client, const CliOptions& o, int rank, std::string* out) {
  proto::Keys keys(o.job);
  redis::Reply value;
  FT_RETURN_IF_ERROR(Run(client, schema::GetMembership(keys, rank), &value));
  proto::Membership m;
  if (!value.is_string() || !schema::DecodeRankValue(schema::RankField(rank), value.str(), &m).ok() || m.node.empty()) {
    return Status::NotFound(fmt::format("rank {} of job {} is not in {}", rank, o.job, keys.Ranks()));
  }
  schema::StreamRead<proto::CommandAck> last;
  FT_RETURN_IF_ERROR(schema::ReadStream(client, schema::Newest(keys.Acks(), 1), &last));
  std::string from = last.entries.empty() ? "0-0" : last.entries.front().id;
  proto::Command command;
  command.id = fmt::format("cli-{}-stacks-{}", o.now_unix_ms, rank);
  command.kind = proto::CommandKindName(proto::CommandKind::kStacks);
  command.rank = rank;
  command.text = "ftmaster stacks";
  command.unix_ms = o.now_unix_ms;
  command.decided_unix_ms = o.now_unix_ms;
  command.incarnations = {proto::RankIncarnation{rank, m.incarnation}};
  redis::Reply added;
  FT_RETURN_IF_ERROR(Run(client, schema::PostCommand(keys, m.node, command), &added));
  // The worker's ack, read as it comes (XREAD after the last ack before the command).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    schema::StreamRead<proto::CommandAck> read;
    FT_RETURN_IF_ERROR(schema::ReadStream(client, schema::After(keys.Acks(), from, 100), &read));
    for (const schema::Entry<proto::CommandAck>& e : read.entries) {
      from = e.id;
      const proto::CommandAck& ack = e.value;
      if (!e.ok() || ack.id != command.id) continue;
      if (o.json) {
        *out += Json({{"rank", rank}, {"node", ack.node}, {"result", ack.result}, {"stack", ack.message}}).dump() + "\n";
      } else {
        *out += fmt::format("rank {} on {} ({}):\n{}", rank, ack.node, ack.result, ack.message);
        if (!ack.message.empty() && ack.message.back() != '\n') *out += "\n";
      }
      return proto::Is(ack, proto::AckResult::kDone) ? Status::Ok() : Status::Unavailable(ack.message);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Timeout(fmt::format("no answer from {}'s worker within 10 s (is it running?)", m.node));
}

}  // namespace ft::master

#include "ftmaster/cli/nodes.h"

#include <fmt/format.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/log.h"
#include "common/units.h"
#include "ftmaster/cordon_round.h"
#include "ftmaster/core/lemon_score.h"
#include "ftmaster/core/text.h"
#include "ftmaster/node_history.h"
#include "ftmaster/store.h"
#include "proto/keys.h"
#include "proto/node_history_codec.h"
#include "schema/node_hashes.h"
#include "schema/streams.h"

extern char** environ;

namespace ft::master {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kReadChunk = 256;         // nodes whose histories are read per pipeline
constexpr int64_t kMaxReadDepth = 10000;   // records read per node at most

Status Run(redis::Commands& client, const redis::Argv& argv, redis::Reply* reply) {
  Status s = client.Run(argv, reply);
  if (!s.ok() && s.message().find("NOPERM") != std::string_view::npos) {
    return s.WithContext(fmt::format("{} {} (the nodes' keys are outside every job: cordons need a user that may "
                                     "write ft:cordon, ft:nodes and ft:node:{{*}}:history; docs/nodes.md)",
                                     argv[0], argv.size() > 1 ? argv[1] : ""));
  }
  return s.WithContext(argv[0]);
}

std::string When(int64_t now, int64_t then) {
  if (then <= 0) return "?";
  return HumanMs(static_cast<double>(std::max<int64_t>(0, now - then))) + " ago";
}

std::string UtcTime(int64_t unix_ms) {
  const time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Json RecordJson(const proto::NodeRecord& r) { return Json::parse(proto::Encode(r), nullptr, false); }

// "evicted in job llama (incident 1700-hang): a hang suspect"
std::string Describe(const proto::NodeRecord& r) {
  std::string out = proto::NodeRecordKindName(r.kind);
  if (!r.incident_kind.empty() && r.incident_kind != out) out += " (" + r.incident_kind + ")";
  if (!r.job.empty()) out += " in job " + r.job;
  if (r.nodes > 1) out += fmt::format(", one of {} nodes", r.nodes);
  if (!r.detail.empty()) out += ": " + r.detail;
  return out;
}

// The history records of `nodes`, newest first per node; garbled entries counted and reported.
Status ReadHistories(redis::Commands& client, const std::vector<std::string>& nodes, int64_t depth, BadValues* bad,
                     std::map<std::string, std::vector<proto::NodeRecord>>* out, size_t* garbled) {
  for (size_t at = 0; at < nodes.size(); at += kReadChunk) {
    std::vector<redis::Argv> reads;
    const size_t end = std::min(nodes.size(), at + kReadChunk);
    for (size_t i = at; i < end; ++i) {
      reads.push_back(schema::Newest(proto::Keys::NodeHistory(nodes[i]), static_cast<size_t>(depth)));
    }
    std::vector<redis::Reply> replies;
    FT_RETURN_IF_ERROR(client.PipelinePartial(reads, &replies).WithContext("XREVRANGE"));
    for (size_t i = at; i < end; ++i) {
      const redis::Reply& reply = replies[i - at];
      std::vector<proto::NodeRecord>& records = (*out)[nodes[i]];
      if (reply.is_error()) {
        ++*garbled;
        bad->Report(proto::Keys::NodeHistory(nodes[i]), reply.str(), Status::Corrupt("unreadable: the node's history is left out"));
        continue;
      }
      std::vector<StreamEntry> entries;
      // One line per node however many are garbled: the count and the first one's error.
      size_t skipped = ParseStream(reply, &entries);
      Status first = skipped > 0 ? Status::Corrupt("an entry that is not a stream entry") : Status::Ok();
      for (const StreamEntry& e : entries) {
        proto::NodeRecord r;
        Status s = schema::DecodeNodeRecord(e, nodes[i], &r);
        if (!s.ok()) {
          if (skipped++ == 0) first = s;
          continue;
        }
        records.push_back(std::move(r));
      }
      if (skipped > 0) {
        *garbled += skipped;
        bad->Report(proto::Keys::NodeHistory(nodes[i]), fmt::format("{} entries", skipped),
                    first.WithContext(fmt::format("{} garbled entr{} skipped, the others read; the first", skipped,
                                                  skipped == 1 ? "y" : "ies")));
      }
    }
  }
  return Status::Ok();
}

// A cordon or uncordon record in the node's history, the node in the index (best effort: the
// cordon itself is the operator's act, the record only its trace).
void RecordCordon(redis::Commands& client, const NodesOptions& o, proto::NodeRecordKind kind, const std::string& node,
                  const std::string& detail) {
  proto::NodeRecord r;
  r.kind = kind;
  r.node = node;
  r.unix_ms = o.now_unix_ms;
  r.detail = proto::CutText(detail, proto::kNodeRecordDetailBytes);
  std::vector<redis::Argv> writes = {schema::AppendNodeRecord(r, o.history_len)};
  for (redis::Argv& w : schema::IndexNode(node, o.now_unix_ms, o.history_ttl_ms)) writes.push_back(std::move(w));
  for (redis::Argv& w : schema::TrimNodeIndex(o.index_nodes, o.history_ttl_ms)) writes.push_back(std::move(w));
  std::vector<redis::Reply> replies;
  Status s = client.PipelinePartial(writes, &replies);
  for (const redis::Reply& reply : replies) {
    if (reply.is_error() && s.ok()) s = Status::Unavailable(reply.str());
  }
  if (!s.ok()) FT_LOG(Warn, Master, "the {} of {} is not in its history: {}", proto::NodeRecordKindName(kind), node, s.message());
}

std::string UntilText(int64_t until_unix_ms) {
  return until_unix_ms == 0 ? std::string("until lifted") : "until " + UtcTime(until_unix_ms);
}

Status Cordon(redis::Commands& client, const NodesOptions& o, std::string* out) {
  const std::string& node = o.cordon;
  const std::string reason = CleanReason(o.reason);
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, schema::GetCordons(), &reply));
  BadValues bad;
  const std::map<std::string, proto::CordonEntry> cordons = ParseCordons(reply, &bad, nullptr);
  // Lapsed cordons go now (nobody else removes them: a job's master only reads ft:cordon).
  std::vector<std::string> lapsed;
  size_t active = 0;
  for (const auto& [n, c] : cordons) {
    if (!c.Active(o.now_unix_ms)) {
      lapsed.push_back(n);
    } else if (n != node) {
      ++active;
    }
  }
  if (!lapsed.empty()) FT_RETURN_IF_ERROR(Run(client, schema::RemoveCordons(lapsed), &reply));
  if (active >= kMaxCordons) {
    return Status::InvalidArgument(fmt::format("{} nodes are cordoned already, the most ft keeps: lift some "
                                               "(ftmaster nodes --uncordon NODE) first", active));
  }
  proto::CordonEntry c;
  c.node = node;
  c.reason = reason;
  c.unix_ms = o.now_unix_ms;
  c.until_unix_ms = o.for_ms > 0 ? o.now_unix_ms + o.for_ms : 0;
  c.by = o.by;
  FT_RETURN_IF_ERROR(Run(client, schema::SetCordon(c), &reply));
  RecordCordon(client, o, proto::NodeRecordKind::kCordon, node,
               c.until_unix_ms == 0 ? reason : fmt::format("{} ({})", reason, UntilText(c.until_unix_ms)));
  Status command = Status::Ok();
  if (!o.cordon_command.empty()) {
    command = RunCordonCommand(o.cordon_command, "cordon", node, reason, c.until_unix_ms, kCordonCommandTimeoutMs);
  }
  if (o.json) {
    Json j = Json::parse(proto::Encode(c), nullptr, false);
    j["command"] = o.cordon_command.empty() ? Json(nullptr) : Json(command.ok() ? "ok" : std::string(command.message()));
    *out += j.dump() + "\n";
  } else {
    *out += fmt::format("cordoned {} for every job, {}: {}\n(each job's master adds it to its eviction list within {} s; "
                        "`ftmaster nodes --cordon-commands slurm|k8s` prints the scheduler's drain)\n",
                        node, UntilText(c.until_unix_ms), reason, CordonRound::kPeriod.count() / 1000);
  }
  return command.ok() ? Status::Ok() : command.WithContext("the cordon is written, but FT_CORDON_COMMAND failed");
}

Status Uncordon(redis::Commands& client, const NodesOptions& o, std::string* out) {
  const std::string& node = o.uncordon;
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, schema::RemoveCordons({node}), &reply));
  if (reply.integer() == 0) return Status::NotFound(fmt::format("{} is not cordoned", node));
  RecordCordon(client, o, proto::NodeRecordKind::kUncordon, node, "cordon lifted");
  Status command = Status::Ok();
  if (!o.cordon_command.empty()) command = RunCordonCommand(o.cordon_command, "uncordon", node, "", 0, kCordonCommandTimeoutMs);
  if (o.json) {
    Json j = {{"node", node}, {"uncordoned", true}};
    j["command"] = o.cordon_command.empty() ? Json(nullptr) : Json(command.ok() ? "ok" : std::string(command.message()));
    *out += j.dump() + "\n";
  } else {
    *out += fmt::format("uncordoned {} (each job's master takes it out of its eviction list within {} s, unless it "
                        "evicted it for a reason of its own)\n",
                        node, CordonRound::kPeriod.count() / 1000);
  }
  return command.ok() ? Status::Ok() : command.WithContext("the cordon is lifted, but FT_CORDON_COMMAND failed");
}

Status CordonCommands(redis::Commands& client, const NodesOptions& o, std::string* out) {
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, schema::GetCordons(), &reply));
  BadValues bad;
  size_t garbled = 0;
  for (const auto& [node, c] : ParseCordons(reply, &bad, &garbled)) {
    if (!c.Active(o.now_unix_ms) || !ValidNodeName(node)) continue;
    *out += (o.cordon_commands == "slurm" ? SlurmDrainLine(node, c.reason) : KubectlTaintLine(node, c.reason)) + "\n";
  }
  return Status::Ok();
}

Status List(redis::Commands& client, const NodesOptions& o, std::string* out) {
  redis::Reply reply;
  FT_RETURN_IF_ERROR(Run(client, schema::NewestIndexedNodes(o.limit), &reply));
  std::vector<std::string> nodes;
  std::set<std::string> seen;
  for (const redis::Reply& r : reply.elements()) {
    if (r.is_string() && seen.insert(r.str()).second) nodes.push_back(r.str());
  }
  FT_RETURN_IF_ERROR(Run(client, schema::GetCordons(), &reply));
  BadValues bad;
  size_t garbled = 0;
  const std::map<std::string, proto::CordonEntry> cordons = ParseCordons(reply, &bad, &garbled);
  for (const auto& [node, c] : cordons) {
    if (seen.insert(node).second) nodes.push_back(node);
  }
  std::map<std::string, std::vector<proto::NodeRecord>> histories;
  const int64_t depth = std::clamp<int64_t>(o.history_len + o.history_len / 8 + 8, 1, kMaxReadDepth);
  FT_RETURN_IF_ERROR(ReadHistories(client, nodes, depth, &bad, &histories, &garbled));
  const LemonOptions lemon{.half_life_ms = o.half_life_ms};
  std::vector<NodeStanding> standings;
  size_t duplicates = 0;
  for (const std::string& node : nodes) {
    NodeStanding s = Assess(node, std::move(histories[node]), o.now_unix_ms, lemon);
    duplicates += s.duplicates;
    if (!o.lemons || s.lemon) standings.push_back(std::move(s));
  }
  SortWorstFirst(&standings);
  auto cordon_of = [&](const std::string& node) -> const proto::CordonEntry* {
    auto it = cordons.find(node);
    return it == cordons.end() ? nullptr : &it->second;
  };
  if (o.json) {
    Json j = Json::object();
    j["lemon_threshold"] = kLemonThreshold;
    j["half_life_s"] = o.half_life_ms / 1000;
    j["garbled"] = garbled;
    j["duplicates"] = duplicates;
    Json list = Json::array();
    for (const NodeStanding& s : standings) {
      Json n = Json::object();
      n["node"] = s.node;
      n["score"] = std::round(s.score * 1000) / 1000;
      n["lemon"] = s.lemon;
      Json counts = Json::object();
      for (proto::NodeRecordKind k : proto::kNodeRecordKinds) counts[proto::NodeRecordKindName(k)] = s.counts[static_cast<size_t>(k)];
      n["counts"] = std::move(counts);
      n["jobs"] = s.jobs;
      n["last"] = s.last ? RecordJson(*s.last) : Json(nullptr);
      if (const proto::CordonEntry* c = cordon_of(s.node)) {
        Json cj = Json::parse(proto::Encode(*c), nullptr, false);
        cj["active"] = c->Active(o.now_unix_ms);
        n["cordon"] = std::move(cj);
      } else {
        n["cordon"] = nullptr;
      }
      Json records = Json::array();
      for (const proto::NodeRecord& r : s.records) records.push_back(RecordJson(r));
      n["records"] = std::move(records);
      list.push_back(std::move(n));
    }
    j["nodes"] = std::move(list);
    *out += j.dump() + "\n";
    return Status::Ok();
  }
  if (standings.empty()) {
    *out += o.lemons ? fmt::format("no lemons (no node scores {} or more)\n", kLemonThreshold)
                     : std::string("no node has a history (ft:nodes is empty)\n");
  } else {
    *out += fmt::format("{:<24} {:>6}  {:<5} {:>7} {:>5} {:>8} {:>7} {:>4} {:>4}  {}\n", "NODE", "SCORE", "LEMON",
                        "EVICTED", "CRASH", "HARDWARE", "SUSPECT", "SLOW", "JOBS", "LAST");
  }
  auto count = [](const NodeStanding& s, proto::NodeRecordKind k) { return s.counts[static_cast<size_t>(k)]; };
  for (const NodeStanding& s : standings) {
    using K = proto::NodeRecordKind;
    *out += fmt::format("{:<24} {:>6.2f}  {:<5} {:>7} {:>5} {:>8} {:>7} {:>4} {:>4}  {}\n", s.node, s.score,
                        s.lemon ? "yes" : "no", count(s, K::kEvicted), count(s, K::kCrash), count(s, K::kHardware),
                        count(s, K::kSuspect), count(s, K::kSlow), s.jobs.size(),
                        s.last ? When(o.now_unix_ms, s.last->unix_ms) + ": " + Describe(*s.last) : std::string("-"));
    if (const proto::CordonEntry* c = cordon_of(s.node)) {
      *out += fmt::format("{:<24} cordoned{}: {} ({}, by {})\n", "", c->Active(o.now_unix_ms) ? "" : " (lapsed)",
                          c->reason, UntilText(c->until_unix_ms), c->by.empty() ? "?" : c->by);
    }
  }
  if (garbled > 0) *out += fmt::format("{} garbled history entries or cordons skipped (see the log above)\n", garbled);
  return Status::Ok();
}

}  // namespace

bool ValidNodeName(std::string_view node) {
  return !node.empty() && node.size() <= 253 && proto::SanitizeName(node) == node;
}

std::string CleanReason(std::string_view reason) {
  std::string out(reason);
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = ' ';
  }
  const size_t first = out.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return out.substr(first, out.find_last_not_of(' ') - first + 1);
}

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string SlurmDrainLine(std::string_view node, std::string_view reason) {
  // The node is a valid node name (no quoting needed); the reason is the operator's text.
  return fmt::format("scontrol update NodeName={} State=DRAIN Reason={}", node, ShellQuote(CleanReason(reason)));
}

std::string TaintValue(std::string_view reason) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  std::string v;
  for (char c : reason) {
    const char mapped = alnum(c) || c == '-' || c == '.' || c == '_' ? c : '_';
    if (mapped == '_' && !v.empty() && v.back() == '_') continue;  // one _ for a run of others
    v += mapped;
  }
  auto trim = [&] {
    while (!v.empty() && !alnum(v.back())) v.pop_back();
    size_t first = 0;
    while (first < v.size() && !alnum(v[first])) ++first;
    v.erase(0, first);
  };
  trim();
  if (v.size() > 63) v.resize(63);
  trim();
  return v.empty() ? "cordoned" : v;
}

std::string KubectlTaintLine(std::string_view node, std::string_view reason) {
  return fmt::format("kubectl taint nodes {} ft.io/lemon={}:NoSchedule --overwrite", node, TaintValue(reason));
}

Status RunCordonCommand(const std::string& command, std::string_view action, std::string_view node,
                        std::string_view reason, int64_t until_unix_ms, int64_t timeout_ms) {
  std::vector<std::string> args;
  for (size_t at = 0; at < command.size();) {
    const size_t start = command.find_first_not_of(' ', at);
    if (start == std::string::npos) break;
    const size_t end = std::min(command.find(' ', start), command.size());
    args.push_back(command.substr(start, end - start));
    at = end;
  }
  if (args.empty()) return Status::InvalidArgument("FT_CORDON_COMMAND names no program");
  args.emplace_back(action);
  args.emplace_back(node);
  args.emplace_back(reason);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Our environment without any FT_CORDON_* of its own, then the cordon's.
  std::vector<std::string> env_text;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "FT_CORDON_", 10) != 0) env_text.emplace_back(*e);
  }
  env_text.push_back("FT_CORDON_ACTION=" + std::string(action));
  env_text.push_back("FT_CORDON_NODE=" + std::string(node));
  env_text.push_back("FT_CORDON_REASON=" + std::string(reason));
  env_text.push_back("FT_CORDON_UNTIL_UNIX_MS=" + std::to_string(until_unix_ms));
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t child = 0;
  const int rc = posix_spawnp(&child, argv[0], nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) return Status::FromErrno(rc, fmt::format("running FT_CORDON_COMMAND {}", args[0]));
  const int64_t step_ms = 20;
  for (int64_t waited = 0;; waited += step_ms) {
    int wstatus = 0;
    const pid_t done = waitpid(child, &wstatus, WNOHANG);
    if (done == child) {
      if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return Status::Ok();
      if (WIFEXITED(wstatus)) {
        return Status::Unavailable(fmt::format("{} {} {} exited with status {}", args[0], action, node, WEXITSTATUS(wstatus)));
      }
      return Status::Unavailable(fmt::format("{} {} {} was killed by signal {}", args[0], action, node,
                                             WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0));
    }
    if (done < 0 && errno != EINTR) return Status::FromErrno(errno, "waiting for FT_CORDON_COMMAND");
    if (waited >= timeout_ms) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
      return Status::Timeout(fmt::format("{} {} {} ran longer than {} s and was killed", args[0], action, node,
                                         timeout_ms / 1000));
    }
    poll(nullptr, 0, static_cast<int>(step_ms));
  }
}

Status CheckNodesOptions(const NodesOptions& o) {
  const int modes = !o.cordon.empty() + !o.uncordon.empty() + !o.cordon_commands.empty();
  if (modes > 1) return Status::InvalidArgument("--cordon, --uncordon and --cordon-commands go one at a time");
  if (!o.cordon.empty() && !ValidNodeName(o.cordon)) {
    return Status::InvalidArgument(fmt::format("--cordon '{}': a node name is 1-253 characters of [A-Za-z0-9_.-]", o.cordon));
  }
  if (!o.uncordon.empty() && !ValidNodeName(o.uncordon)) {
    return Status::InvalidArgument(fmt::format("--uncordon '{}': a node name is 1-253 characters of [A-Za-z0-9_.-]", o.uncordon));
  }
  if (!o.cordon.empty()) {
    const std::string reason = CleanReason(o.reason);
    if (reason.empty()) return Status::InvalidArgument("--cordon needs --reason TEXT (what the scheduler's drain shows)");
    if (reason.size() > kMaxCordonReasonBytes) {
      return Status::InvalidArgument(fmt::format("--reason is {} bytes, more than {}", reason.size(), kMaxCordonReasonBytes));
    }
  } else if (!o.reason.empty() || o.for_ms != 0) {
    return Status::InvalidArgument("--reason and --for go with --cordon");
  }
  if (o.for_ms < 0) return Status::InvalidArgument("--for must be positive");
  if (!o.cordon_commands.empty() && o.cordon_commands != "slurm" && o.cordon_commands != "k8s") {
    return Status::InvalidArgument(fmt::format("--cordon-commands '{}': slurm or k8s", o.cordon_commands));
  }
  if (o.lemons && modes > 0) return Status::InvalidArgument("--lemons lists; it does not go with a cordon");
  if (o.limit == 0) return Status::InvalidArgument("--limit must be at least 1");
  return Status::Ok();
}

Status NodesOptionsFromFlags(const Config& config, bool lemons, const std::string& cordon, const std::string& uncordon,
                             const std::string& reason, const std::string& for_text,
                             const std::string& cordon_commands, const std::string& limit, NodesOptions* out) {
  NodesOptions o;
  o.lemons = lemons;
  o.cordon = cordon;
  o.uncordon = uncordon;
  o.reason = reason;
  o.cordon_commands = cordon_commands;
  if (!for_text.empty()) {
    Duration d{};
    Status s = ParseDuration(for_text, &d);
    if (!s.ok() || d.count() <= 0) {
      return Status::InvalidArgument(fmt::format("--for '{}': a positive duration such as 24h or 7d", for_text));
    }
    o.for_ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  }
  if (!limit.empty()) {
    int64_t n = 0;
    if (!ParseInt(limit, &n).ok() || n < 1) return Status::InvalidArgument(fmt::format("--limit '{}': a count of nodes, 1 or more", limit));
    o.limit = static_cast<size_t>(n);
  }
  auto ms = [](Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  o.half_life_ms = std::max<int64_t>(1, ms(config.lemon_half_life));
  o.history_len = config.node_history_len;
  o.history_ttl_ms = ms(config.node_history_ttl);
  o.index_nodes = config.node_history_nodes;
  o.cordon_command = config.cordon_command;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  const passwd* pw = getpwuid(getuid());
  o.by = fmt::format("{}@{}", pw != nullptr && pw->pw_name != nullptr ? pw->pw_name : std::to_string(getuid()), host);
  FT_RETURN_IF_ERROR(CheckNodesOptions(o));
  *out = std::move(o);
  return Status::Ok();
}

Status NodesCommand(redis::Commands& client, const NodesOptions& o, std::string* out) {
  FT_RETURN_IF_ERROR(CheckNodesOptions(o));
  if (!o.cordon.empty()) return Cordon(client, o, out);
  if (!o.uncordon.empty()) return Uncordon(client, o, out);
  if (!o.cordon_commands.empty()) return CordonCommands(client, o, out);
  return List(client, o, out);
}

}  // namespace ft::master

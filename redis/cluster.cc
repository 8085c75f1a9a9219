#include "redis/cluster.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <thread>

#include "common/log.h"

namespace ft::redis {
namespace {

using std::chrono::milliseconds;

void Log(Subsystem subsystem, LogLevel level, const std::string& message) {
  if (log::Enabled(subsystem, level)) log::Write(subsystem, level, message);
}

std::string Addr(std::string_view host, int port) {
  bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

// "host:port" or "[v6]:port" back into its parts.
bool SplitAddr(std::string_view addr, std::string* host, int* port) {
  size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view h = addr.substr(0, colon), p = addr.substr(colon + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int value = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (ec != std::errc() || end != p.data() + p.size() || value <= 0 || value > 65535) return false;
  *host = std::string(h);
  *port = value;
  return true;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// A redirect reply: "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381".
struct Redirect {
  bool ask = false;
  int slot = -1;
  std::string addr;
};

bool ParseRedirect(const Reply& reply, Redirect* out) {
  if (!reply.is_error()) return false;
  std::string_view m = reply.str();
  bool moved = m.rfind("MOVED ", 0) == 0, ask = m.rfind("ASK ", 0) == 0;
  if (!moved && !ask) return false;
  m.remove_prefix(moved ? 6 : 4);
  size_t space = m.find(' ');
  if (space == std::string_view::npos) return false;
  int slot = -1;
  auto [end, ec] = std::from_chars(m.data(), m.data() + space, slot);
  if (ec != std::errc() || end != m.data() + space || slot < 0 || slot >= kClusterSlots) return false;
  std::string host;
  int port = 0;
  if (!SplitAddr(m.substr(space + 1), &host, &port)) return false;
  out->ask = ask;
  out->slot = slot;
  out->addr = Addr(host, port);
  return true;
}

// Commands whose every argument after the name is a key.
bool AllArgsAreKeys(const std::string& name) {
  static const char* const kNames[] = {"DEL",    "EXISTS", "UNLINK", "TOUCH",  "MGET",
                                       "SUNION", "SINTER", "SDIFF",  "WATCH",  "PFCOUNT"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

bool Keyless(const std::string& name) {
  static const char* const kNames[] = {"PING",  "INFO",  "AUTH",    "HELLO",  "CLUSTER",
                                       "ACL",   "SCRIPT", "CONFIG", "CLIENT", "TIME",
                                       "DBSIZE", "ECHO",  "COMMAND", "MULTI", "EXEC",
                                       "DISCARD", "ASKING", "READONLY", "FLUSHALL", "FLUSHDB",
                                       "SELECT", "SCAN",  "WAIT",   "MEMORY", "LASTSAVE"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

}  // namespace

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc = static_cast<uint16_t>(crc ^ (static_cast<uint16_t>(byte) << 8));
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

int KeySlot(std::string_view key) {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kClusterSlots - 1);
}

std::vector<size_t> CommandKeys(const Argv& argv) {
  std::vector<size_t> keys;
  if (argv.size() < 2) return keys;
  std::string name = Upper(argv[0]);
  if (Keyless(name)) return keys;
  if (name == "EVAL" || name == "EVALSHA" || name == "EVAL_RO" || name == "EVALSHA_RO" ||
      name == "FCALL" || name == "FCALL_RO") {
    if (argv.size() < 3) return keys;
    size_t n = 0;
    auto [end, ec] = std::from_chars(argv[2].data(), argv[2].data() + argv[2].size(), n);
    if (ec != std::errc() || end != argv[2].data() + argv[2].size()) return keys;
    for (size_t i = 0; i < n && 3 + i < argv.size(); ++i) keys.push_back(3 + i);
    return keys;
  }
  if (name == "XREAD" || name == "XREADGROUP") {
    for (size_t i = 1; i < argv.size(); ++i) {
      if (Upper(argv[i]) == "STREAMS") {
        size_t n = (argv.size() - i - 1) / 2;
        for (size_t k = 0; k < n; ++k) keys.push_back(i + 1 + k);
        break;
      }
    }
    return keys;
  }
  if (name == "MSET" || name == "MSETNX") {
    for (size_t i = 1; i < argv.size(); i += 2) keys.push_back(i);
    return keys;
  }
  if (AllArgsAreKeys(name)) {
    for (size_t i = 1; i < argv.size(); ++i) keys.push_back(i);
    return keys;
  }
  if (name == "SMOVE" || name == "RENAME" || name == "RENAMENX" || name == "RPOPLPUSH" ||
      name == "LMOVE" || name == "COPY") {
    keys.push_back(1);
    if (argv.size() > 2) keys.push_back(2);
    return keys;
  }
  keys.push_back(1);
  return keys;
}

Status CommandSlot(const Argv& argv, int* slot) {
  std::vector<size_t> keys = CommandKeys(argv);
  if (keys.empty()) {
    *slot = -1;
    return Status::Ok();
  }
  int first = KeySlot(argv[keys[0]]);
  for (size_t i = 1; i < keys.size(); ++i) {
    if (KeySlot(argv[keys[i]]) != first) {
      return Status::InvalidArgument(
          argv[0] + " on keys in different Redis Cluster slots (" + argv[keys[0]] + " in " +
          std::to_string(first) + ", " + argv[keys[i]] + " in " +
          std::to_string(KeySlot(argv[keys[i]])) +
          "): a multi-key operation must stay within one hash tag (docs/redis-schema.md, Slots)");
    }
  }
  *slot = first;
  return Status::Ok();
}

Status ParseClusterSlots(const Reply& reply, std::string_view asked_host,
                         std::vector<SlotRange>* out) {
  if (!reply.is_array()) {
    return Status::Corrupt("CLUSTER SLOTS answered " + reply.DebugString().substr(0, 80) +
                           ", not an array of slot ranges");
  }
  std::vector<SlotRange> ranges;
  for (size_t i = 0; i < reply.size(); ++i) {
    const Reply& r = reply[i];
    if (!r.is_array() || r.size() < 3 || !r[0].is_integer() || !r[1].is_integer() ||
        !r[2].is_array() || r[2].size() < 2 || !r[2][1].is_integer()) {
      return Status::Corrupt("CLUSTER SLOTS range " + std::to_string(i) + " is malformed: " +
                             r.DebugString().substr(0, 120));
    }
    SlotRange range;
    range.first = static_cast<int>(r[0].integer());
    range.last = static_cast<int>(r[1].integer());
    range.host = r[2][0].str();
    if (range.host.empty() || range.host == "?") range.host = std::string(asked_host);
    range.port = static_cast<int>(r[2][1].integer());
    if (range.first < 0 || range.last >= kClusterSlots || range.first > range.last ||
        range.port <= 0 || range.port > 65535) {
      return Status::Corrupt("CLUSTER SLOTS range " + std::to_string(i) + " is out of bounds: " +
                             r.DebugString().substr(0, 120));
    }
    ranges.push_back(std::move(range));
  }
  *out = std::move(ranges);
  return Status::Ok();
}

// --- ClusterClient ----------------------------------------------------------------------------

ClusterClient::ClusterClient(Endpoint endpoint, ReconnectPolicy policy)
    : endpoint_(std::move(endpoint)),
      policy_(policy),
      rng_(policy.seed != 0 ? policy.seed : std::random_device{}()) {
  if (endpoint_.seeds.empty()) endpoint_.seeds.push_back({endpoint_.host, endpoint_.port});
}

ClusterClient::~ClusterClient() = default;

milliseconds ClusterClient::Backoff(int failures) {
  return ReconnectBackoff(policy_, failures, &rng_);
}

std::string ClusterClient::Where() const { return Redacted(endpoint_); }

std::string ClusterClient::OwnerOf(int slot) const {
  if (owner_.empty() || slot < 0 || slot >= kClusterSlots) return "";
  return owner_[static_cast<size_t>(slot)];
}

ClusterClient::Node* ClusterClient::NodeFor(const std::string& addr) {
  auto it = nodes_.find(addr);
  if (it != nodes_.end()) return it->second.get();
  auto node = std::make_unique<Node>();
  if (!SplitAddr(addr, &node->host, &node->port)) return nullptr;
  Node* raw = node.get();
  nodes_.emplace(addr, std::move(node));
  return raw;
}

Status ClusterClient::Connected(Node* node) {
  if (node->client.connected()) return Status::Ok();
  Clock::time_point now = Clock::now();
  const std::string addr = Addr(node->host, node->port);
  if (now < node->retry_at) {
    return Status::Unavailable("Redis Cluster node " + addr + " failed just now (" +
                               std::string(node->client.last_error().message()) +
                               "); waiting for its backoff or a new slot map");
  }
  Endpoint ep = endpoint_;
  ep.cluster = false;
  ep.seeds.clear();
  ep.host = node->host;
  ep.port = node->port;
  ep.db = 0;
  Status s = node->client.Connect(ep, policy_.connect_timeout, policy_.io_timeout);
  if (!s.ok()) {
    NodeFailed(node, s);
    return s;
  }
  node->failures = 0;
  return Status::Ok();
}

void ClusterClient::NodeFailed(Node* node, const Status& why) {
  ++node->failures;
  node->retry_at = Clock::now() + Backoff(node->failures);
  node->client.Close();
  last_error_ = why;
  map_stale_ = true;  // a failover may have moved its slots: ask the others
}

std::string ClusterClient::AnyMaster() const {
  for (const std::string& a : owner_) {
    if (!a.empty()) return a;
  }
  return "";
}

Status ClusterClient::RefreshMap() {
  ++map_refreshes_;
  last_refresh_ = Clock::now();
  // Known masters first (connected ones first of all), then the seeds.
  std::vector<std::string> order;
  for (const auto& [addr, node] : nodes_) {
    if (node->client.connected()) order.push_back(addr);
  }
  for (const auto& [addr, node] : nodes_) {
    if (!node->client.connected()) order.push_back(addr);
  }
  for (const HostPort& seed : endpoint_.seeds) {
    std::string a = Addr(seed.host, seed.port);
    if (std::find(order.begin(), order.end(), a) == order.end()) order.push_back(a);
  }
  Status first_error;
  for (const std::string& addr : order) {
    Node* node = NodeFor(addr);
    if (node == nullptr) continue;
    Status s = Connected(node);
    Reply reply;
    if (s.ok()) s = node->client.Run({"CLUSTER", "SLOTS"}, &reply);
    if (s.ok() && !node->client.connected()) s = node->client.last_error();
    if (!s.ok()) {
      if (!node->client.connected() && node->client.broken()) NodeFailed(node, s);
      if (first_error.ok()) first_error = s;
      continue;
    }
    std::vector<SlotRange> ranges;
    s = ParseClusterSlots(reply, node->host, &ranges);
    if (!s.ok()) {
      if (first_error.ok()) first_error = s;
      continue;
    }
    std::vector<std::string> owner(kClusterSlots);
    size_t covered = 0;
    for (const SlotRange& r : ranges) {
      std::string a = Addr(r.host, r.port);
      for (int slot = r.first; slot <= r.last; ++slot) {
        if (owner[static_cast<size_t>(slot)].empty()) ++covered;
        owner[static_cast<size_t>(slot)] = a;
      }
    }
    if (covered == 0) {
      if (first_error.ok()) {
        first_error = Status::Unavailable("Redis Cluster node " + addr +
                                          " owns no slot map yet (CLUSTER SLOTS is empty)");
      }
      continue;
    }
    owner_ = std::move(owner);
    map_stale_ = false;
    // Connections to nodes that own nothing now (a demoted master) go.
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      bool owns = std::find(owner_.begin(), owner_.end(), it->first) != owner_.end();
      bool seed = false;
      for (const HostPort& sp : endpoint_.seeds) seed = seed || Addr(sp.host, sp.port) == it->first;
      if (!owns && !seed) {
        it = nodes_.erase(it);
      } else {
        if (!owns) it->second->client.Close();
        ++it;
      }
    }
    if (covered < static_cast<size_t>(kClusterSlots)) {
      Log(policy_.log_subsystem, LogLevel::kWarn,
          fmt::format("Redis Cluster at {}: the slot map from {} covers {} of {} slots; commands "
                      "for the others fail until the cluster is complete (redis-cli --cluster "
                      "check)",
                      Where(), addr, covered, kClusterSlots));
    }
    return Status::Ok();
  }
  if (first_error.ok()) first_error = Status::Unavailable("no Redis Cluster node to ask");
  return Status::Unavailable("cannot load the slot map of the Redis Cluster " + Where() + ": " +
                             std::string(first_error.message()));
}

bool ClusterClient::Ensure(Clock::time_point now) {
  if (!owner_.empty() && !map_stale_) return true;
  if (now < next_map_attempt_) return !owner_.empty();
  const Clock::time_point started = Clock::now();
  Status s = RefreshMap();
  if (s.ok()) {
    if (reported_down_) {
      Log(policy_.log_subsystem, LogLevel::kInfo,
          fmt::format("Redis Cluster {}: slot map loaded again after {} failed attempts", Where(),
                      map_failures_));
    }
    reported_down_ = false;
    map_failures_ = 0;
    last_error_ = Status::Ok();
    return true;
  }
  ++map_failures_;
  last_error_ = s;
  if (!reported_down_) {
    Log(policy_.log_subsystem, LogLevel::kWarn,
        std::string(s.message()) + ". Retrying with backoff up to " +
            std::to_string(policy_.max_backoff.count()) + " ms; work continues meanwhile");
    reported_down_ = true;
  }
  next_map_attempt_ = now + (Clock::now() - started) + Backoff(map_failures_);
  return !owner_.empty();
}

Status ClusterClient::Connect(milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    Clock::time_point now = Clock::now();
    if (Ensure(now)) return Status::Ok();
    if (now >= deadline) return last_error_.ok() ? Status::Timeout("no slot map") : last_error_;
    std::this_thread::sleep_for(std::min<Clock::duration>(next_map_attempt_ - now, deadline - now) +
                                milliseconds(1));
  }
}

Status ClusterClient::RouteOf(const Argv& argv, std::string* addr) {
  int slot = -1;
  FT_RETURN_IF_ERROR(CommandSlot(argv, &slot));
  if (owner_.empty() || map_stale_) Ensure(Clock::now());
  if (owner_.empty()) {
    return Status::Unavailable("no slot map of the Redis Cluster " + Where() + " yet" +
                               (last_error_.ok() ? "" : ": " + std::string(last_error_.message())));
  }
  *addr = slot < 0 ? AnyMaster() : owner_[static_cast<size_t>(slot)];
  if (addr->empty()) {
    return Status::Unavailable("Redis Cluster " + Where() + ": no master owns slot " +
                               std::to_string(slot) + " (the cluster is incomplete)");
  }
  return Status::Ok();
}

Status ClusterClient::RunFollowing(const Argv& argv, Reply* out) {
  if (argv.empty()) return Status::InvalidArgument("empty Redis command");
  std::string addr;
  FT_RETURN_IF_ERROR(RouteOf(argv, &addr));
  bool asking = false;
  Status last;
  for (int attempt = 0; attempt < kMaxRedirects; ++attempt) {
    Node* node = NodeFor(addr);
    if (node == nullptr) return Status::Corrupt("Redis Cluster sent a bad node address " + addr);
    Status s = Connected(node);
    Reply reply;
    if (s.ok()) {
      if (asking) {
        std::vector<Reply> replies;
        s = node->client.PipelinePartial({{"ASKING"}, argv}, &replies);
        if (s.ok()) reply = std::move(replies[1]);
      } else {
        s = node->client.Run(argv, &reply, Client::ErrorReplies::kKeep);
      }
      if (!s.ok()) NodeFailed(node, s);
    }
    if (!s.ok()) {
      // The node is gone or unreachable: a failover may have promoted its replica. Ask the
      // others for the map (bounded: once per try) and go where it points.
      last = s;
      const Clock::time_point retry_at = node->retry_at;  // RefreshMap may drop the node
      // At most one reload per kMinRefreshGap: while a shard has no master, every command
      // for it would otherwise ask for the map again (thousands of workers, one failover).
      if (Clock::now() - last_refresh_ < kMinRefreshGap) return last;
      if (!RefreshMap().ok()) return last;
      std::string next;
      FT_RETURN_IF_ERROR(RouteOf(argv, &next));
      if (next == addr && Clock::now() < retry_at) return last;
      addr = next;
      asking = false;
      continue;
    }
    Redirect redirect;
    if (ParseRedirect(reply, &redirect)) {
      ++redirects_;
      if (redirect.ask) {
        asking = true;
      } else {
        asking = false;
        if (!owner_.empty()) owner_[static_cast<size_t>(redirect.slot)] = redirect.addr;
        map_stale_ = true;  // more slots probably moved: reload at the next Ensure
      }
      addr = redirect.addr;
      last = ServerErrorStatus(addr, argv[0], reply.str());
      continue;
    }
    if (reply.is_error() && reply.str().rfind("TRYAGAIN", 0) == 0 && attempt + 1 < kMaxRedirects) {
      // A multi-key command during a slot migration: the keys are split for a moment.
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    *out = std::move(reply);
    return Status::Ok();
  }
  return Status::Unavailable("Redis Cluster " + Where() + ": " + argv[0] + " still redirected after " +
                             std::to_string(kMaxRedirects) + " tries: " + std::string(last.message()));
}

Status ClusterClient::RunKeep(const Argv& argv, Reply* out) { return RunFollowing(argv, out); }

Status ClusterClient::Run(const Argv& argv, Reply* out) {
  Reply reply;
  FT_RETURN_IF_ERROR(RunFollowing(argv, &reply));
  if (reply.is_error()) return ServerErrorStatus(Where(), argv[0], reply.str());
  *out = std::move(reply);
  return Status::Ok();
}

Status ClusterClient::PipelinePartial(const std::vector<Argv>& commands,
                                      std::vector<Reply>* received) {
  received->clear();
  for (const Argv& argv : commands) {
    if (argv.empty()) return Status::InvalidArgument("empty Redis command in a pipeline");
  }
  // Route every command; a cross-slot one gets the error reply a server would give.
  std::vector<std::string> route(commands.size());
  std::vector<std::string> refused(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    Status s = RouteOf(commands[i], &route[i]);
    if (s.code() == StatusCode::kInvalidArgument) {
      refused[i] = "CROSSSLOT " + std::string(s.message());
      route[i].clear();
    } else if (!s.ok()) {
      return s;
    }
  }
  // One pipeline per node, all in flight at once: every node's commands are written out
  // first, then each node's replies are read.
  struct Batch {
    std::vector<size_t> index;  // into commands, in order
    std::vector<Argv> argv;
    std::vector<Reply> replies;
    Status status;
  };
  std::map<std::string, Batch> batches;
  for (size_t i = 0; i < commands.size(); ++i) {
    if (route[i].empty()) continue;
    Batch& b = batches[route[i]];
    b.index.push_back(i);
    b.argv.push_back(commands[i]);
  }
  for (auto& [addr, b] : batches) {
    Node* node = NodeFor(addr);
    if (node == nullptr) {
      b.status = Status::Corrupt("Redis Cluster sent a bad node address " + addr);
      continue;
    }
    b.status = Connected(node);
    if (b.status.ok()) b.status = node->client.PipelineSend(b.argv);
    if (!b.status.ok() && node->client.broken()) NodeFailed(node, b.status);
  }
  for (auto& [addr, b] : batches) {
    if (!b.status.ok()) continue;
    Node* node = NodeFor(addr);
    b.status = node->client.PipelineReceive(b.argv, &b.replies);
    if (!b.status.ok()) NodeFailed(node, b.status);
  }
  // Reassembled in order, up to the first reply that is missing: that prefix is what the
  // cluster is known to have executed. (Commands after it may have run on other nodes; a
  // caller that resends them delivers them at least once, as after a broken connection.)
  received->reserve(commands.size());
  std::map<std::string, size_t> next;
  for (size_t i = 0; i < commands.size(); ++i) {
    if (route[i].empty()) {
      received->push_back(Reply::Error(refused[i]));
      continue;
    }
    Batch& b = batches[route[i]];
    size_t& k = next[route[i]];
    if (k >= b.replies.size()) return b.status.ok() ? Status::Internal("a reply went missing") : b.status;
    Reply& reply = b.replies[k++];
    Redirect redirect;
    if (ParseRedirect(reply, &redirect)) {
      // The slot moved (or is moving) since the map was loaded: this one command again,
      // where the cluster says, before the next reply is taken.
      Reply again;
      FT_RETURN_IF_ERROR(RunFollowing(commands[i], &again));
      received->push_back(std::move(again));
    } else {
      received->push_back(std::move(reply));
    }
  }
  return Status::Ok();
}

Status OpenCommands(const Endpoint& endpoint, milliseconds connect_timeout, milliseconds io_timeout,
                    std::unique_ptr<Commands>* out) {
  if (endpoint.cluster) {
    auto cluster = std::make_unique<ClusterClient>(
        endpoint, ReconnectPolicy{.connect_timeout = connect_timeout,
                                  .io_timeout = io_timeout.count() > 0 ? io_timeout : connect_timeout});
    FT_RETURN_IF_ERROR(cluster->Connect(connect_timeout));
    *out = std::move(cluster);
    return Status::Ok();
  }
  auto client = std::make_unique<Client>();
  FT_RETURN_IF_ERROR(client->Connect(endpoint, connect_timeout, io_timeout));
  *out = std::move(client);
  return Status::Ok();
}

}  // namespace ft::redis

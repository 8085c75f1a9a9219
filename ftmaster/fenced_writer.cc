#include "ftmaster/fenced_writer.h"

#include "common/log.h"
#include "proto/codec.h"

namespace ft::master {
namespace {

// Runs a list of commands iff KEYS[1] (the lease) holds ARGV[1] (our id). ARGV[2]: the number
// of commands; then per command its argument count and arguments. -1: fenced out.
constexpr const char* kFencedScript = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local i = 2
local n = tonumber(ARGV[i]); i = i + 1
for c = 1, n do
  local argc = tonumber(ARGV[i]); i = i + 1
  redis.call(unpack(ARGV, i, i + argc - 1))
  i = i + argc
end
return n
)lua";

// The exactly-once write of a window's incidents. KEYS: lease, master hash, incidents stream,
// evicted set (incidents capped at MAXLEN ~ 10000). ARGV: id, now, n, n x (incident id, kind, suspects, json), n_evict, nodes...,
// n_on_win, pairs..., n_always, pairs..., n_del, fields... Per incident, HSETNX
// decided:<id> is the gate: only its winner XADDs the incident (if the XADD fails the gate is
// taken back, so a refused write is retried rather than lost). On any win the evicted nodes
// and the on-win fields (the action) are written too; the rest always. -1: fenced out.
constexpr const char* kIncidentScript = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local now = ARGV[2]
local i = 3
local n = tonumber(ARGV[i]); i = i + 1
local won = {}
local any = false
for k = 1, n do
  local gate = 'decided:' .. ARGV[i]
  if redis.call('HSETNX', KEYS[2], gate, now) == 1 then
    local r = redis.pcall('XADD', KEYS[3], 'MAXLEN', '~', '10000', '*',
                          'kind', ARGV[i + 1], 'suspects', ARGV[i + 2], 'json', ARGV[i + 3])
    if type(r) == 'table' and r.err then
      redis.call('HDEL', KEYS[2], gate)
      return redis.error_reply(r.err)
    end
    won[k] = 1
    any = true
  else
    won[k] = 0
  end
  i = i + 4
end
local ne = tonumber(ARGV[i]); i = i + 1
if any and ne > 0 then redis.call('SADD', KEYS[4], unpack(ARGV, i, i + ne - 1)) end
i = i + ne
local nw = tonumber(ARGV[i]); i = i + 1
for k = 1, nw do
  if any then redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
  i = i + 2
end
local na = tonumber(ARGV[i]); i = i + 1
for k = 1, na do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local nd = tonumber(ARGV[i]); i = i + 1
for k = 1, nd do
  redis.call('HDEL', KEYS[2], ARGV[i])
  i = i + 1
end
return won
)lua";

}  // namespace

FencedWriter::FencedWriter(redis::ReconnectingClient* redis, const proto::Keys* keys,
                           std::string id, uint64_t* fenced_out)
    : redis_(redis), keys_(keys), id_(std::move(id)), fenced_out_(fenced_out) {}

bool FencedWriter::Run(const std::vector<redis::Argv>& commands) {
  if (commands.empty()) return true;
  redis::Argv argv = {"EVAL", kFencedScript, "1", keys_->Leader(), id_,
                      std::to_string(commands.size())};
  for (const redis::Argv& c : commands) {
    argv.push_back(std::to_string(c.size()));
    argv.insert(argv.end(), c.begin(), c.end());
  }
  redis::Reply reply;
  Status s = redis_->client().Run(argv, &reply);
  if (!s.ok()) {
    FT_LOG(Warn, Master, "write to Redis failed: {}; retrying next round", s.message());
    return false;
  }
  if (reply.is_integer() && reply.integer() == -1) {
    ++*fenced_out_;
    FT_LOG(Warn, Master, "write refused: the lease {} is no longer this master's ('{}'); "
           "standing by", keys_->Leader(), id_);
    return false;
  }
  return true;
}

std::optional<std::vector<bool>> FencedWriter::WriteIncidents(
    const std::vector<proto::Incident>& incidents, int64_t unix_ms,
    const std::vector<std::string>& evict,
    const std::vector<std::pair<std::string, std::string>>& on_win,
    const std::vector<std::pair<std::string, std::string>>& always,
    const std::vector<std::string>& del) {
  redis::Argv argv = {"EVAL",
                      kIncidentScript,
                      "4",
                      keys_->Leader(),
                      keys_->MasterState(),
                      keys_->Incidents(),
                      keys_->Evicted(),
                      id_,
                      std::to_string(unix_ms),
                      std::to_string(incidents.size())};
  for (const proto::Incident& incident : incidents) {
    argv.push_back(incident.id);
    argv.push_back(incident.kind);
    argv.push_back(proto::SuspectsField(incident.suspects));
    argv.push_back(proto::Encode(incident));
  }
  argv.push_back(std::to_string(evict.size()));
  argv.insert(argv.end(), evict.begin(), evict.end());
  argv.push_back(std::to_string(on_win.size()));
  for (const auto& [f, v] : on_win) {
    argv.push_back(f);
    argv.push_back(v);
  }
  argv.push_back(std::to_string(always.size()));
  for (const auto& [f, v] : always) {
    argv.push_back(f);
    argv.push_back(v);
  }
  argv.push_back(std::to_string(del.size()));
  argv.insert(argv.end(), del.begin(), del.end());
  redis::Reply reply;
  Status s = redis_->client().Run(argv, &reply);
  if (!s.ok()) {
    FT_LOG(Warn, Master, "writing incident {} failed: {}; retrying next round",
           incidents.empty() ? "" : incidents.front().id, s.message());
    return std::nullopt;
  }
  if (reply.is_integer() && reply.integer() == -1) {
    ++*fenced_out_;
    FT_LOG(Warn, Master, "incident write refused: the lease is no longer this master's; standing by");
    return std::nullopt;
  }
  std::vector<bool> won(incidents.size(), false);
  for (size_t i = 0; i < incidents.size() && i < reply.size(); ++i) won[i] = reply[i].integer() == 1;
  return won;
}

}  // namespace ft::master

#include "redis/redis_store.h"

namespace ft::redis {
namespace {

// PEXPIRE / DEL only while the value is still ours.
constexpr const char* kRenewScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
constexpr const char* kDeleteScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) else return 0 end";

// The command lists of both scripts below (AppendCommands writes them): their count, then per
// command its argument count and arguments. run_listed(i, run) runs, when `run`, the list that
// starts at ARGV[i]; it returns the index after the list and the list's count.
constexpr const char* kRunListed = R"lua(
local function run_listed(i, run)
  local n = tonumber(ARGV[i]); i = i + 1
  for c = 1, n do
    local argc = tonumber(ARGV[i]); i = i + 1
    if run then redis.call(unpack(ARGV, i, i + argc - 1)) end
    i = i + argc
  end
  return i, n
end
)lua";

// Runs a list of commands iff KEYS[1] (the fence) holds ARGV[1]; the list from ARGV[2].
// -1: fenced out.
const std::string& FencedScript() {
  static const std::string script = std::string(kRunListed) + R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local _, n = run_listed(2, true)
return n
)lua";
  return script;
}

// GatedAppend under a fence. KEYS: fence, gate hash, stream. ARGV: fence value, gate value,
// stream cap, n entries x (gate, field count, fields...), the on_any_win list, the always list.
// Returns the per-entry wins, or -1 when fenced out.
const std::string& GatedAppendScript() {
  static const std::string script = std::string(kRunListed) + R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local gate_value = ARGV[2]
local cap = ARGV[3]
local i = 4
local n = tonumber(ARGV[i]); i = i + 1
local won = {}
local any = false
for k = 1, n do
  local gate = ARGV[i]
  local nf = tonumber(ARGV[i + 1])
  i = i + 2
  if redis.call('HSETNX', KEYS[2], gate, gate_value) == 1 then
    local r = redis.pcall('XADD', KEYS[3], 'MAXLEN', '~', cap, '*', unpack(ARGV, i, i + nf - 1))
    if type(r) == 'table' and r.err then
      redis.call('HDEL', KEYS[2], gate)
      return redis.error_reply(r.err)
    end
    won[k] = 1
    any = true
  else
    won[k] = 0
  end
  i = i + nf
end
i = run_listed(i, any)
run_listed(i, true)
return won
)lua";
  return script;
}

void AppendCommands(const std::vector<Argv>& commands, Argv* argv) {
  argv->push_back(std::to_string(commands.size()));
  for (const Argv& c : commands) {
    argv->push_back(std::to_string(c.size()));
    argv->insert(argv->end(), c.begin(), c.end());
  }
}

}  // namespace

RedisStore::RedisStore(Endpoint endpoint, ReconnectPolicy policy)
    : redis_(endpoint, policy),
      cluster_(endpoint.cluster ? std::make_unique<ClusterClient>(endpoint, policy) : nullptr) {}

Status RedisStore::Run(const Argv& argv, Reply* out) {
  return cluster_ ? cluster_->Run(argv, out) : redis_.client().Run(argv, out);
}

Status RedisStore::PipelinePartial(const std::vector<Argv>& commands,
                                   std::vector<Reply>* received) {
  return cluster_ ? cluster_->PipelinePartial(commands, received)
                  : redis_.client().PipelinePartial(commands, received);
}

std::string RedisStore::Where() const { return Redacted(redis_.endpoint()); }

Status RedisStore::RenewIfHeld(const std::string& key, const std::string& value, int64_t ms,
                               bool* held) {
  Reply reply;
  FT_RETURN_IF_ERROR(Run({"EVAL", kRenewScript, "1", key, value, std::to_string(ms)}, &reply));
  *held = reply.integer() == 1;
  return Status::Ok();
}

Status RedisStore::DeleteIfHeld(const std::string& key, const std::string& value, bool* held) {
  Reply reply;
  FT_RETURN_IF_ERROR(Run({"EVAL", kDeleteScript, "1", key, value}, &reply));
  *held = reply.integer() == 1;
  return Status::Ok();
}

Status RedisStore::FencedRun(const Fence& fence, const std::vector<Argv>& commands, bool* held) {
  Argv argv = {"EVAL", FencedScript(), "1", fence.key, fence.value};
  AppendCommands(commands, &argv);
  Reply reply;
  FT_RETURN_IF_ERROR(Run(argv, &reply));
  *held = !(reply.is_integer() && reply.integer() == -1);
  return Status::Ok();
}

Status RedisStore::FencedGatedAppend(const Fence& fence, const GatedAppend& append,
                                     std::vector<bool>* won, bool* held) {
  Argv argv = {"EVAL", GatedAppendScript(), "3", fence.key, append.gate_hash, append.stream,
               fence.value, append.gate_value, append.stream_cap,
               std::to_string(append.entries.size())};
  for (const GatedAppend::Entry& e : append.entries) {
    argv.push_back(e.gate);
    argv.push_back(std::to_string(e.fields.size()));
    argv.insert(argv.end(), e.fields.begin(), e.fields.end());
  }
  AppendCommands(append.on_any_win, &argv);
  AppendCommands(append.always, &argv);
  Reply reply;
  FT_RETURN_IF_ERROR(Run(argv, &reply));
  won->clear();
  if (reply.is_integer() && reply.integer() == -1) {
    *held = false;
    return Status::Ok();
  }
  *held = true;
  for (size_t i = 0; i < append.entries.size(); ++i) {
    won->push_back(i < reply.size() && reply[i].integer() == 1);
  }
  return Status::Ok();
}

}  // namespace ft::redis

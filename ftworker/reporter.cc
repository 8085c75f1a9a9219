#include "ftworker/reporter.h"

#include <fmt/format.h>

#include "proto/codec.h"
#include "schema/streams.h"

namespace ft::worker {

namespace {

constexpr int kHeartbeatTtlSeconds = 5;

}  // namespace

Reporter::Reporter(const proto::Keys& keys, std::string node, size_t buffer)
    : keys_(keys), node_(std::move(node)), outbox_(buffer) {}

void Reporter::AddEvent(const proto::Event& event) {
  ++events_added_;
  outbox_.Append(schema::AppendEvent(keys_, event));
  // The table at the event is also the rank's newest progress.
  SetProgress(event.progress);
}

void Reporter::AddAck(const proto::CommandAck& ack) {
  outbox_.Append(schema::AppendAck(keys_, ack));
}

namespace {

// Skips a write whose value equals the last one written for the same slot.
bool Changed(std::map<std::string, std::string>& last, const std::string& slot,
             const std::string& value) {
  auto it = last.find(slot);
  if (it != last.end() && it->second == value) return false;
  last[slot] = value;
  return true;
}

}  // namespace

void Reporter::SetProgress(const proto::RankProgress& progress) {
  std::string slot = fmt::format("progress:{}", progress.rank);
  // Ages change at every read, so there is nothing to compare: the daemon calls this once per
  // report period, and at each event.
  outbox_.Put(slot, {"HSET", keys_.ProgressOf(progress.rank), std::to_string(progress.rank),
                     proto::Encode(progress)});
}

void Reporter::SetSummary(const proto::RankSummary& summary) {
  std::string slot = fmt::format("summary:{}", summary.rank);
  outbox_.Put(slot, {"HSET", keys_.SummaryOf(summary.rank), std::to_string(summary.rank),
                     proto::Encode(summary)});
}

void Reporter::SetMembership(const proto::Membership& membership) {
  std::string slot = fmt::format("ranks:{}", membership.rank);
  std::string value = proto::Encode(membership);
  if (!Changed(last_written_, slot, value)) return;
  outbox_.Put(slot, {"HSET", keys_.Ranks(), std::to_string(membership.rank), value});
  // ranks:version after the values (the outbox sends its slots in name order, "ranks:<n>"
  // before "ranks:version", in one pipeline): a master that saw the version unchanged has
  // seen every membership value; it re-reads the hash only on a bump.
  outbox_.Put("ranks:version", {"INCR", keys_.RanksVersion()});
}

void Reporter::ForgetMemberships() {
  std::erase_if(last_written_, [](const auto& entry) { return entry.first.starts_with("ranks:"); });
  heartbeats_ = 0;  // and the workers set, with the next heartbeat
}

void Reporter::Heartbeat(int pid, const std::string& host, const std::vector<int>& ranks,
                         int64_t unix_ms) {
  proto::WorkerHeartbeat beat;
  beat.node = node_;
  beat.host = host;
  beat.pid = pid;
  beat.ranks = ranks;
  beat.unix_ms = unix_ms;
  outbox_.Put("heartbeat", {"SET", keys_.WorkerHeartbeat(node_), proto::Encode(beat), "EX",
                            std::to_string(kHeartbeatTtlSeconds)});
  // The set changes once per node: refreshed every kWorkersRefresh heartbeats (and after
  // ForgetMemberships, for a Redis that lost it), not every second.
  if (heartbeats_++ % kWorkersRefresh == 0) outbox_.Put("workers", {"SADD", keys_.Workers(), node_});
}

namespace {

// KEYS: the hash to write (ckpt:<step> or ckpt:<step>:buddy), ckpt:steps. ARGV: rank, value, step.
constexpr const char* kSetCopyScript =
    "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
    "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[3]) return 1";
// KEYS: the hash to remove from, ckpt:steps, the step's other hash. ARGV: rank, step. The step
// leaves ckpt:steps once neither its own copies' nor its buddy copies' hash holds anything.
constexpr const char* kRemoveCopyScript =
    "redis.call('HDEL', KEYS[1], ARGV[1]) "
    "if redis.call('HLEN', KEYS[1]) == 0 and redis.call('HLEN', KEYS[3]) == 0 then "
    "redis.call('ZREM', KEYS[2], ARGV[2]) end return 1";

// KEYS: ckpt:<step>:buddy, ckpt:steps, ckpt:<step>. ARGV: rank, step, holder node. A buddy copy
// is removed only by its holder: another node may hold (and have reported) the rank's copy of
// that step since the ring moved.
constexpr const char* kRemoveBuddyScript =
    "local v = redis.call('HGET', KEYS[1], ARGV[1]) "
    "if v and cjson.decode(v)['node'] == ARGV[3] then redis.call('HDEL', KEYS[1], ARGV[1]) end "
    "if redis.call('HLEN', KEYS[1]) == 0 and redis.call('HLEN', KEYS[3]) == 0 then "
    "redis.call('ZREM', KEYS[2], ARGV[2]) end return 1";

std::string CopySlot(int64_t step, int rank) { return fmt::format("ckpt:{}:{}", step, rank); }
std::string BuddySlot(int64_t step, int rank) { return fmt::format("ckpt:{}:{}:buddy", step, rank); }

}  // namespace

void Reporter::SetCkptCopy(const proto::CkptCopy& copy) {
  outbox_.Put(CopySlot(copy.step, copy.rank),
              {"EVAL", kSetCopyScript, "2", keys_.CkptStep(copy.step), keys_.CkptSteps(),
               std::to_string(copy.rank), proto::Encode(copy), std::to_string(copy.step)});
}

void Reporter::RemoveCkptCopy(int64_t step, int rank) {
  outbox_.Put(CopySlot(step, rank), {"EVAL", kRemoveCopyScript, "3", keys_.CkptStep(step), keys_.CkptSteps(),
                                     keys_.CkptBuddy(step), std::to_string(rank), std::to_string(step)});
}

void Reporter::SetBuddyCopy(const proto::CkptCopy& copy) {
  outbox_.Put(BuddySlot(copy.step, copy.rank),
              {"EVAL", kSetCopyScript, "2", keys_.CkptBuddy(copy.step), keys_.CkptSteps(),
               std::to_string(copy.rank), proto::Encode(copy), std::to_string(copy.step)});
}

void Reporter::RemoveBuddyCopy(int64_t step, int rank) {
  outbox_.Put(BuddySlot(step, rank), {"EVAL", kRemoveBuddyScript, "3", keys_.CkptBuddy(step), keys_.CkptSteps(),
                                      keys_.CkptStep(step), std::to_string(rank), std::to_string(step), node_});
}

Status Reporter::Flush(redis::Commands& client) { return outbox_.Flush(client); }

}  // namespace ft::worker

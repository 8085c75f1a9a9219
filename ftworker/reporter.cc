#include "ftworker/reporter.h"

#include <fmt/format.h>

#include "proto/codec.h"
#include "schema/node_sets.h"
#include "schema/rank_hashes.h"
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
  outbox_.Put(slot, schema::SetProgress(keys_, progress));
}

void Reporter::SetSummary(const proto::RankSummary& summary) {
  std::string slot = fmt::format("summary:{}", summary.rank);
  outbox_.Put(slot, schema::SetSummary(keys_, summary));
}

void Reporter::SetMembership(const proto::Membership& membership) {
  std::string slot = fmt::format("ranks:{}", membership.rank);
  redis::Argv set = schema::SetMembership(keys_, membership);
  if (!Changed(last_written_, slot, set.back())) return;
  outbox_.Put(slot, std::move(set));
  // ranks:version after the values (the outbox sends its slots in name order, "ranks:<n>"
  // before "ranks:version", in one pipeline): a master that saw the version unchanged has
  // seen every membership value; it re-reads the hash only on a bump.
  outbox_.Put("ranks:version", schema::BumpRanksVersion(keys_));
}

void Reporter::ForgetMemberships() {
  std::erase_if(last_written_, [](const auto& entry) { return entry.first.starts_with("ranks:"); });
  // And the workers set, now rather than with the next heartbeat: a master's stop goes to the
  // nodes in it (and those of the membership), and one may come before that heartbeat.
  heartbeats_ = 1;
  outbox_.Put("workers", schema::AddWorker(keys_, node_));
}

void Reporter::Heartbeat(int pid, const std::string& host, const std::vector<int>& ranks,
                         int64_t unix_ms) {
  const proto::WorkerHeartbeat beat{.node = node_, .host = host, .pid = pid, .ranks = ranks, .unix_ms = unix_ms};
  outbox_.Put("heartbeat", schema::SetHeartbeat(keys_, beat, std::chrono::seconds(kHeartbeatTtlSeconds)));
  // The set changes once per node: refreshed every kWorkersRefresh heartbeats (and after
  // ForgetMemberships, for a Redis that lost it), not every second.
  if (heartbeats_++ % kWorkersRefresh == 0) outbox_.Put("workers", schema::AddWorker(keys_, node_));
}

namespace {

std::string CopySlot(int64_t step, int rank) { return fmt::format("ckpt:{}:{}", step, rank); }
std::string BuddySlot(int64_t step, int rank) { return fmt::format("ckpt:{}:{}:buddy", step, rank); }

}  // namespace

void Reporter::SetCkptCopy(const proto::CkptCopy& copy) {
  outbox_.Put(CopySlot(copy.step, copy.rank), schema::SetCopy(keys_, copy));
}

void Reporter::RemoveCkptCopy(int64_t step, int rank) {
  outbox_.Put(CopySlot(step, rank), schema::RemoveCopy(keys_, step, rank));
}

void Reporter::SetBuddyCopy(const proto::CkptCopy& copy) {
  outbox_.Put(BuddySlot(copy.step, copy.rank), schema::SetBuddyCopy(keys_, copy));
}

void Reporter::RemoveBuddyCopy(int64_t step, int rank) {
  outbox_.Put(BuddySlot(step, rank), schema::RemoveBuddyCopy(keys_, step, rank, node_));
}

Status Reporter::Flush(redis::Commands& client) { return outbox_.Flush(client); }

}  // namespace ft::worker

// master_bench: timing the master's library code step by step; see profile.h.
#include "bench/master_bench/profile.h"

#include <sched.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "bench/master_bench/common.h"
#include "bench/master_bench/cpu_usage.h"
#include "ftmaster/core/attribution.h"
#include "ftmaster/core/decision.h"
#include "ftmaster/store.h"
#include "ftmaster/core/straggler.h"
#include "ftmaster/core/timeouts.h"
#include "ftmaster/core/topology.h"
#include "proto/codec.h"
#include "proto/master_codec.h"
#include "proto/messages.h"
#include "redis/client.h"
#include "schema/streams.h"
#include "redis/spread.h"

namespace ft::bench {

void Profile(const Options& o, const Layout& layout, const proto::Keys& keys,
             const RedisBackend& backend) {
  const int cpus = CpuCount();
  cpu_set_t saved;
  CPU_ZERO(&saved);
  sched_getaffinity(0, sizeof(saved), &saved);
  if (o.pin && cpus >= 2) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus - 1, &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
  std::unique_ptr<redis::Commands> client;
  Check(backend.Open(&client), "profile: connecting to Redis");
  redis::Commands& c = *client;
  master::BadValues bad;
  master::DecodedHash<proto::RankProgress> progress("progress");
  master::DecodedHash<proto::Membership> ranks("ranks");
  redis::Reply reply;

  auto t = Clock::now();
  Check(redis::HGetAllOf(c, keys.AllProgress(), &reply), "profile: HGETALL progress");
  const double hget_progress = MsSince(t);
  const size_t progress_bytes = [&] {
    size_t b = 0;
    for (const redis::Reply& e : reply.elements()) b += e.str().size();
    return b;
  }();
  t = Clock::now();
  progress.Load(reply, &bad);
  const double decode_progress = MsSince(t);

  t = Clock::now();
  Check(c.Run({"HGETALL", keys.Ranks()}, &reply), "profile: HGETALL ranks");
  const double hget_ranks = MsSince(t);
  t = Clock::now();
  ranks.Load(reply, &bad);
  const double decode_ranks = MsSince(t);
  t = Clock::now();
  ranks.Load(reply, &bad);  // unchanged, as on every read after the first
  const double compare_ranks = MsSince(t);

  t = Clock::now();
  schema::StreamRead<proto::Event> read;
  Check(schema::ReadStream(c, schema::After(keys.Events(), "", 100000), &read), "profile: XRANGE events");
  std::vector<proto::Event> events;
  for (schema::Entry<proto::Event>& e : read.entries) {
    if (e.ok()) events.push_back(std::move(e.value));
  }
  const double read_events = MsSince(t);

  master::AttributionInput in;
  in.progress = progress.values();
  in.membership = ranks.values();
  in.events = events;
  in.now_unix_ms = UnixMs();
  in.stale_ms = 3 * 200 + 1000 + 1000;
  in.min_wait_ms = 1000;
  t = Clock::now();
  (void)master::WindowCanClose(in, std::numeric_limits<int64_t>::max());
  const double can_close = MsSince(t);
  t = Clock::now();
  std::vector<proto::Incident> incidents = master::Attribute(in);
  const double attribute = MsSince(t);
  t = Clock::now();
  master::Topology topology;
  Check(master::Topology::Parse(layout.Describe(), "tp-dp-pp", 0, &topology), "profile: topology");
  master::Decision decision = master::Decide(incidents, topology, ranks.values(), false);
  master::ApplyDecision(decision, incidents);
  const double decide = MsSince(t);
  t = Clock::now();
  size_t incident_bytes = 0;
  for (const proto::Incident& i : incidents) incident_bytes += proto::Encode(i).size();
  const double encode = MsSince(t);
  // The action the master persists with the incident (ftmaster/master_loop: one save target
  // per rank asked to save), encoded and written as its incident script carries it.
  t = Clock::now();
  proto::MasterAction action;
  action.decision = decision.decision;
  action.save = decision.save;
  action.phase = proto::FirstPhase(decision.decision);
  const std::string action_json = proto::Encode(action);
  const double encode_action = MsSince(t);
  t = Clock::now();
  Check(c.Run({"HSET", keys.MasterState() + ":profile", "action", action_json}, &reply),
        "profile: writing the action");
  const double write_action = MsSince(t);

  // The steady-state round (every 500 ms, or 3x its cost): summaries into the timeout model
  // and the straggler detector. Every summary changed since the last read (workers rewrite
  // them every second), so all are decoded, as here.
  master::DecodedHash<proto::RankSummary> summaries("summary");
  t = Clock::now();
  Check(redis::HGetAllOf(c, keys.AllSummaries(), &reply), "profile: HGETALL summary");
  const double hget_summary = MsSince(t);
  t = Clock::now();
  summaries.Load(reply, &bad);
  const double decode_summary = MsSince(t);
  t = Clock::now();
  master::TimeoutModel timeouts{master::TimeoutOptions{}};
  master::StragglerDetector stragglers{master::StragglerOptions{}};
  stragglers.SetMembership(ranks.values());
  for (const proto::RankSummary& s : summaries.values()) {
    timeouts.Add(s);
    stragglers.Add(s);
  }
  (void)timeouts.Update(UnixMs());
  (void)stragglers.Evaluate(UnixMs());
  const double model = MsSince(t);

  std::printf("bench: profile ranks=%d (one core, in-process, same library code): "
              "HGETALL progress %.1f ms (%.1f MB), decode progress %.1f ms, HGETALL ranks "
              "%.1f ms, decode ranks %.1f ms (unchanged re-read %.1f ms), events read+decode "
              "%.1f ms (%zu), WindowCanClose %.1f ms, Attribute %.1f ms, Decide %.1f ms, "
              "encode incident %.2f ms (%zu bytes), encode action %.1f ms (%.1f MB), write action "
              "%.1f ms; decision '%s' saving %zu ranks; "
              "summary round: HGETALL summary %.1f ms, decode %.1f ms, timeouts+stragglers "
              "%.1f ms\n",
              layout.world(), hget_progress, static_cast<double>(progress_bytes) / 1e6,
              decode_progress, hget_ranks, decode_ranks, compare_ranks, read_events,
              events.size(), can_close, attribute, decide, encode, incident_bytes, encode_action,
              static_cast<double>(action_json.size()) / 1e6, write_action,
              proto::DecisionKindName(decision.decision), decision.save.size(), hget_summary, decode_summary,
              model);
  std::fflush(stdout);
  sched_setaffinity(0, sizeof(saved), &saved);
}

}  // namespace ft::bench

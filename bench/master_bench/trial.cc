// master_bench: running one trial and measuring its figures; see trial.h.
#include "bench/master_bench/trial.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "bench/master_bench/common.h"
#include "bench/master_bench/cpu_usage.h"
#include "bench/master_bench/master_process.h"
#include "bench/master_bench/profile.h"
#include "bench/master_bench/redis_backend.h"
#include "bench/master_bench/synthetic_job.h"
#include "bench/master_bench/worker_driver.h"
#include "ftmaster/store.h"
#include "proto/codec.h"
#include "proto/messages.h"
#include "redis/client.h"
#include "redis/cluster.h"

namespace ft::bench {

Trial RunTrial(const Options& o, const Layout& layout, int trial, bool profile) {
  Trial out;
  const int n = layout.world();
  const OtherLoad others;
  RedisBackend backend(o.cluster, o.redis_server);
  Check(backend.Start(), o.cluster ? "starting the Redis Cluster (3 masters, 3 replicas)"
                                   : "starting redis-server");
  std::unique_ptr<redis::Commands> db_client;
  Check(backend.Open(&db_client), "connecting to the bench's Redis");
  redis::Commands& db = *db_client;

  // The stopped rank: mid-job, a different one per trial.
  Hang hang;
  hang.xt = 3;
  hang.xd = (layout.dp * 3 / 5 + 7 * trial) % layout.dp;
  hang.xp = (layout.pp / 2 + 1 + trial) % layout.pp;
  hang.stopped = layout.Rank(hang.xt, hang.xd, hang.xp);
  const std::string job = fmt::format("bench-master-{}-{}", n, trial);
  // The synthetic job has been running for a minute: seq numbers and step counts are past any
  // warm-up.
  const int64_t start_ms = UnixMs() - 60000;
  SyntheticJob sj(layout, job, hang, start_ms);
  auto t = Clock::now();
  Check(sj.Build(), "building the synthetic job");
  const double build_ms = MsSince(t);

  // What the workers have written before the master starts.
  std::vector<redis::Argv> cmds;
  sj.MembershipCommands(&cmds);
  Pipeline(db, cmds, "writing membership");
  Driver driver(&sj, &db, UnixMs(), o.every_report);
  driver.WriteAll(UnixMs());

  char dir_template[] = "/tmp/ft-master-bench-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) Die(fmt::format("mkdtemp: {}", std::strerror(errno)));
  const std::string log_path = std::string(dir) + "/ftmaster.log";
  Master master;
  Check(master.Start(o, job, backend.url(), backend.password(), layout, log_path),
        "starting ftmaster");
  auto fail = [&](const std::string& why) {
    master.Stop();
    Die(fmt::format("ranks={} trial {}: {}\n--- ftmaster log ({}) ---\n{}", n, trial + 1, why,
                    log_path, master.LogTail()));
  };
  auto alive = [&] {
    int status = 0;
    if (master.Exited(&status)) fail(fmt::format("ftmaster exited (status {:#x})", status));
  };

  // Running: the master leads and has published timeouts from the summaries.
  auto next = Clock::now();
  // 30 s, and 1 s more per 2k ranks: the master's first pass over the summaries, on a
  // machine it shares with the synthetic workers and redis-server.
  const auto ready_deadline = Clock::now() + std::chrono::seconds(30 + n / 2000);
  double timeout_ms = -1;
  while (timeout_ms < 0) {
    alive();
    if (Clock::now() > ready_deadline) {
      fail(fmt::format("no timeout table published within {} s", 30 + n / 2000));
    }
    driver.Tick(UnixMs());
    redis::Reply table;
    Check(db.Run({"GET", sj.keys().Timeouts()}, &table), "reading the timeout table");
    if (table.is_string()) {
      proto::TimeoutTable tt;
      Check(proto::Decode(table.str(), &tt), "decoding the published timeout table");
      timeout_ms = tt.default_ms;
      const uint64_t tp_comm = layout.TpComm(hang.xd, hang.xp);
      for (const proto::TimeoutEntry& e : tt.entries) {
        if (e.comm_id == tp_comm && e.op == proto::OpKind::kAllReduce && e.bucket == proto::SizeBucket(4 << 20)) {
          timeout_ms = e.ms;
        }
      }
    }
    Pace(&next);
  }
  sj.SetTimeout(timeout_ms);
  // Let the master's first full reads (every value new to it) pass before measuring.
  for (auto until = Clock::now() + std::chrono::seconds(1); Clock::now() < until; Pace(&next)) {
    driver.Tick(UnixMs());
  }
  alive();

  // Steady state: the master's CPU, and what each shard took in, over steady_s.
  std::vector<RedisBackend::Shard> shards_a, shards_b;
  Check(backend.Shards(&shards_a), "reading the shards' INFO stats");
  const double cpu_a = CpuSeconds(master.pid());
  const auto steady_start = Clock::now();
  const auto steady = std::chrono::milliseconds(static_cast<int64_t>(o.steady_s * 1000));
  for (auto until = steady_start + steady; Clock::now() < until; Pace(&next)) {
    driver.Tick(UnixMs());
  }
  const double cpu_b = CpuSeconds(master.pid());
  const double steady_s = MsSince(steady_start) / 1000;
  Check(backend.Shards(&shards_b), "reading the shards' INFO stats");
  out.steady_cpu_pct = (cpu_b - cpu_a) / steady_s * 100;
  out.shard_bytes_s = RedisBackend::Rates(shards_a, shards_b, steady_s, true);
  out.shard_commands_s = RedisBackend::Rates(shards_a, shards_b, steady_s, false);
  // Which shard each of the job's hash tags lands on (redis/tests/redis_cluster.h: master m
  // owns slots [m * 16384 / 3, (m + 1) * 16384 / 3)).
  std::string tags = "one server";
  if (o.cluster) {
    int per[3] = {0, 0, 0};
    ++per[redis::KeySlot(sj.keys().Events()) * 3 / redis::kClusterSlots];
    for (int g = 0; g < proto::Keys::kGroups; ++g) {
      ++per[redis::KeySlot(sj.keys().Progress(g)) * 3 / redis::kClusterSlots];
    }
    tags = fmt::format("tags per shard {}/{}/{}", per[0], per[1], per[2]);
  }
  out.input_bytes_s = 0;
  for (size_t i = 0; i < shards_a.size() && i < shards_b.size(); ++i) {
    out.input_bytes_s += static_cast<double>(shards_b[i].input_bytes - shards_a[i].input_bytes) / steady_s;
  }
  alive();

  // From the hang on, Redis and ftmaster (forked before) keep their priority and the synthetic
  // workers, which stand in for other hosts, take what CPU is left: once a 131k job hangs its
  // tables are due every 200 ms, more than this core can send, and a driver that kept the
  // core busy would starve the servers it measures (on the cluster the six servers' latency
  // then passed the master's 2 s lease). The steady period above ran at equal priority, so
  // its write rates are the workers' full rates.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  // The hang: rank X makes no call from t0 on; the job backs up behind it.
  sj.SetHangStart(UnixMs());
  driver.SetHung();
  driver.Watch(hang.stopped);
  std::vector<SyntheticJob::PendingEvent> events = sj.Events(o.all_events);
  out.events = events.size();
  size_t emitted = 0;
  double cpu_first = NAN;
  const auto deadline = Clock::now() + std::chrono::seconds(30) +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_ms));
  auto first_event_at = Clock::now();
  std::optional<master::StreamEntry> found;
  while (!found) {
    alive();
    if (Clock::now() > deadline) {
      fail(fmt::format("no incident within 30 s of the timeout ({} of {} events written)", emitted,
                       events.size()));
    }
    const int64_t now = UnixMs();
    std::vector<redis::Argv> due;
    while (emitted < events.size() && events[emitted].due <= now) {
      due.push_back(std::move(events[emitted].xadd));
      due.push_back(std::move(events[emitted].hset));
      ++emitted;
    }
    if (!due.empty()) {
      if (std::isnan(cpu_first)) {
        cpu_first = CpuSeconds(master.pid());
        first_event_at = Clock::now();
      }
      Pipeline(db, due, "writing timeout events");
    }
    driver.Tick(now);
    if (emitted > 0) {
      redis::Reply reply;
      Check(db.Run({"XRANGE", sj.keys().Incidents(), "-", "+", "COUNT", "100"}, &reply),
            "reading the incidents");
      std::vector<master::StreamEntry> entries;
      master::ParseStream(reply, &entries);
      for (master::StreamEntry& e : entries) {
        const std::string* kind = e.Get("kind");
        if (kind != nullptr && *kind != "straggler") {
          found = std::move(e);
          break;
        }
        if (kind != nullptr) fail("a straggler incident in a job with no straggler: " + e.id);
      }
    }
    if (!found) Pace(&next);
  }
  const double cpu_c = CpuSeconds(master.pid());
  out.decision_cpu_pct = (cpu_c - cpu_first) / (MsSince(first_event_at) / 1000) * 100;

  const std::string* json = found->Get("json");
  proto::Incident incident;
  if (json == nullptr || !proto::Decode(*json, &incident).ok()) {
    fail("an unreadable incident " + found->id);
  }
  bool names_it = false;
  for (const proto::Suspect& s : incident.suspects) names_it = names_it || s.rank == hang.stopped;
  if (incident.kind != "hang" || !names_it || incident.suspects.size() != 1) {
    fail(fmt::format("the incident does not name the stopped rank {} alone as hung: kind {}, "
                     "suspects '{}', message: {}", hang.stopped, incident.kind,
                     found->Get("suspects") ? *found->Get("suspects") : "", incident.message));
  }
  uint64_t id_ms = 0, id_seq = 0;
  master::ParseStreamId(found->id, &id_ms, &id_seq);
  out.incident_id = incident.id;
  const auto written_ms = static_cast<int64_t>(id_ms);
  // The first event counts from when it reached Redis: the synthetic workers share this
  // machine, and when their writes fall behind (131k ranks' tables every 200 ms) the events
  // go out late. How late is printed; a real worker on its own host is not.
  int64_t first_ms = incident.first_event_unix_ms;
  {
    redis::Reply reply;
    Check(db.Run({"XRANGE", sj.keys().Events(), "-", "+", "COUNT", "1"}, &reply),
          "reading the first event");
    std::vector<master::StreamEntry> entries;
    master::ParseStream(reply, &entries);
    uint64_t ms = 0, seq = 0;
    if (!entries.empty() && master::ParseStreamId(entries.front().id, &ms, &seq)) {
      out.event_late_ms = static_cast<double>(static_cast<int64_t>(ms) - first_ms);
      first_ms = std::max(first_ms, static_cast<int64_t>(ms));
    }
  }
  out.window_ms = static_cast<double>(incident.window_closed_unix_ms - first_ms);
  out.close_to_written = static_cast<double>(written_ms - incident.window_closed_unix_ms);
  out.field_decide_ms = incident.decide_ms;
  out.first_to_written = static_cast<double>(written_ms - first_ms);
  // What the window waits for: the stopped rank's first table observed at or after the first
  // event's time (attribution.h, WindowCanClose), and when it was in Redis.
  for (const Driver::Written& w : driver.watched()) {
    if (w.observed_unix_ms >= incident.first_event_unix_ms) {
      out.stopped_table_ms = static_cast<double>(w.in_redis_unix_ms - first_ms);
      break;
    }
  }
  const int64_t opened = LogLineMs(log_path, "incident window opened");
  if (opened > 0) out.open_to_decided = static_cast<double>(incident.decided_unix_ms - opened);

  master.Stop();
  out.others_pct = others.Pct();
  std::printf("bench: ranks=%d trial %d/%d: window_ms=%.0f (first event -> window closed), "
              "decide_ms=%.0f (window closed -> incident written), e2e_ms=%.0f (first event -> "
              "written); incident decide_ms=%.0f (first event -> decided; window opened -> "
              "decided %.0f); master cpu %.1f%% steady, %.1f%% first event -> "
              "written; %zu timeout events (timeout %.0f ms); rank %d named (%s, decision %s); "
              "the stopped rank's first table after the first event in Redis at %+.0f ms; "
              "window notices %d; "
              "setup %.0f ms, longest driver write %.0f ms, first event written %.0f ms late; "
              "steady Redis input %s B/s, %s commands/s (%s); "
              "other processes %.0f%% of a core\n",
              n, trial + 1, o.trials, out.window_ms, out.close_to_written, out.first_to_written,
              out.field_decide_ms, out.open_to_decided, out.steady_cpu_pct,
              out.decision_cpu_pct, out.events, timeout_ms, hang.stopped, incident.kind.c_str(),
              incident.decision.c_str(), out.stopped_table_ms, driver.windows_opened(), build_ms,
              driver.max_write_ms(),
              out.event_late_ms,
              out.shard_bytes_s.c_str(), out.shard_commands_s.c_str(),
              (o.cluster ? "per shard's master, " + tags : tags).c_str(), out.others_pct);
  std::fflush(stdout);
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 0);  // may be refused
  if (profile) Profile(o, layout, sj.keys(), backend);

  if (!o.keep_logs.empty()) {
    mkdir(o.keep_logs.c_str(), 0700);
    const std::string kept = fmt::format("{}/ftmaster-{}-{}.log", o.keep_logs, n, trial + 1);
    if (std::rename(log_path.c_str(), kept.c_str()) != 0) {
      std::fprintf(stderr, "master_bench: keeping %s as %s: %s\n", log_path.c_str(), kept.c_str(),
                   std::strerror(errno));
    }
  }
  std::remove(log_path.c_str());
  rmdir(dir);
  return out;
}

}  // namespace ft::bench

#include "ftworker/daemon.h"

#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "common/log.h"
#include "ftworker/ckpt/arena_sweep.h"
#include "ftworker/worker_metrics.h"
#include "jitckpt/arena_pages.h"
#include "proto/codec.h"
#include "redis/redis_store.h"
#include "schema/published.h"
#include "schema/rank_hashes.h"
#include "schema/streams.h"

namespace ft::worker {

namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kHeartbeatNs = 1000 * kMs;
constexpr uint64_t kMasterPollNs = 100 * kMs;  // timeouts version and new commands, without notices
// With notices (ftworker/master_watch.h) the polls only catch a notice that was missed.
constexpr uint64_t kSlowPollNs = 5000 * kMs;
constexpr auto kWatchBlock = std::chrono::milliseconds(5000);  // one XREAD per node per 5 s when calm
// The master renews an open window's notice every second (ftmaster/window_round.cc); one whose
// "closed" was lost ends here.
constexpr uint64_t kWindowNoticeLifeNs = 30000 * kMs;
// Half the straggler detector's 10% excess (FT_STRAGGLER_PCT): a summary standing up to this far off
// the rank's smoothed times is read as still current, so a noisy rank's high moment must not stand.
constexpr double kSummaryChangeRatio = 0.05;
constexpr uint64_t kMembershipCheckNs = 1000 * kMs;
constexpr uint64_t kArenaGcPollNs = 5000 * kMs;  // the job's state for the arena pass

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int64_t UnixMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

Daemon::Daemon(DaemonOptions options, NodeMonitor* monitor)
    : Daemon(options, monitor,
             std::make_unique<redis::RedisStore>(
                 options.endpoint,
                 redis::ReconnectPolicy{.connect_timeout = std::chrono::milliseconds(500),
                                        .io_timeout = std::chrono::milliseconds(1000),
                                        .log_subsystem = Subsystem::kWorker}),
             // The watch's reads block for kWatchBlock: its I/O timeout leaves room for that.
             std::make_unique<redis::RedisStore>(
                 options.endpoint,
                 redis::ReconnectPolicy{.connect_timeout = std::chrono::milliseconds(500),
                                        .io_timeout = kWatchBlock + std::chrono::milliseconds(1500),
                                        .log_subsystem = Subsystem::kWorker})) {}

Daemon::Daemon(DaemonOptions options, NodeMonitor* monitor, std::unique_ptr<redis::Store> store,
               std::unique_ptr<redis::Store> watch_store)
    : options_(std::move(options)),
      monitor_(monitor),
      keys_(options_.job),
      reporter_(keys_, options_.node, static_cast<size_t>(std::max<int64_t>(options_.config.redis_buffer, 16))),
      runner_(monitor, options_.node,
              std::chrono::duration_cast<std::chrono::milliseconds>(options_.config.save_deadline).count(),
              options_.config.stacks ? options_.config.stack_tool : std::string(),
              options_.config.stacks ? (options_.config.ckpt_arena_dir.empty() ? std::string("/dev/shm")
                                                                               : options_.config.ckpt_arena_dir)
                                     : std::string()),
      keeper_(std::make_unique<CkptKeeper>(CkptKeeperOptions{
          .job = options_.job,
          .node = options_.node,
          .arena_dir = options_.config.ckpt_arena_dir,
          .local_dir = options_.config.ckpt_dir,
          .remote_dir = options_.config.ckpt_remote_dir,
          .keep = static_cast<int>(std::max<int64_t>(options_.config.ckpt_keep, 1)),
          .persist = options_.persist,
          .arena_holder = options_.arena_holder})),
      plan_sync_(RestorePlanSyncOptions{.job = options_.job,
                                        .node = options_.node,
                                        .arena_dir = options_.config.ckpt_arena_dir,
                                        .local_dir = options_.config.ckpt_dir,
                                        .remote_dir = options_.config.ckpt_remote_dir}),
      store_(std::move(store)),
      rank_devices_(options_.config.sysfs_root),
      progress_pacer_(std::chrono::duration_cast<std::chrono::milliseconds>(options_.config.progress_refresh).count()),
      summary_pacer_(std::chrono::duration_cast<std::chrono::milliseconds>(options_.config.summary_refresh).count(),
                     kSummaryChangeRatio) {
  if (watch_store != nullptr) {
    watch_ = std::make_unique<MasterWatch>(keys_, options_.node, std::move(watch_store), kWatchBlock);
  }
  if (options_.config.ckpt_replicate_every > 0) {
    ReplicatorOptions replicate;
    replicate.job = options_.job;
    replicate.node = options_.node;
    replicate.arena_dir = options_.config.ckpt_arena_dir;
    replicate.every = options_.config.ckpt_replicate_every;
    replicate.bytes_per_second = static_cast<uint64_t>(std::max<int64_t>(options_.config.ckpt_replicate_rate, 0));
    replicate.engine = options_.pull_engine != nullptr ? options_.pull_engine : MakeTransferEngine();
    replicate.pull.fast_path = options_.pull_fast_path;
    // A paced pull delivers no faster than the cap: the trickle floor must not give it up.
    replicate.pull.min_bytes_per_second =
        replicate.bytes_per_second > 0
            ? std::min<uint64_t>(static_cast<uint64_t>(options_.config.pull_min_rate), replicate.bytes_per_second / 4)
            : static_cast<uint64_t>(options_.config.pull_min_rate);
    replicate.pull.connections = 1;  // background traffic: one connection, not the restore's several
    replicator_ = std::make_unique<Replicator>(std::move(replicate));
  }
  transfer_ = std::make_unique<TransferService>(TransferServiceOptions{
      .job = options_.job,
      .node = options_.node,
      .listen_address = options_.listen_address.empty() ? "127.0.0.1" : options_.listen_address,
      .port = options_.config.transfer_port,
      .copies = CopyProviderOptions{.job = options_.job,
                                    .local_dir = options_.config.ckpt_dir,
                                    .arena_path_of = [keeper = keeper_.get()](ckpt::CopyId id) {
                                      return keeper->ArenaPathOf(id);
                                    },
                                    .arena_paths = [keeper = keeper_.get()] { return keeper->ArenaPaths(); },
                                    .replica_path_of = [replicator = replicator_.get()](ckpt::CopyId id) {
                                      return replicator != nullptr ? replicator->ReplicaPathOf(id) : std::string();
                                    },
                                    .mapped = options_.arena_mapped,
                                    .unmapped = options_.arena_unmapped},
      .fast_path = options_.fast_path,
      .make_server = options_.make_transfer_server});
  std::vector<int> node_ranks;
  if (Status s = ParseNodeRanks(options_.config.node_ranks, &node_ranks); !s.ok()) {
    FT_LOG(Error, Worker, "FT_NODE_RANKS: {}; this node prefetches only for the ranks it sees", s.message());
    node_ranks.clear();
  }
  // Every node prefetches: a rank relaunched in place (torchrun --max_restarts, a Slurm
  // requeue) whose planned copy is not on its node has it pulled from a replica on another
  // node, as a replacement node's ranks (FT_NODE_RANKS) do. The ranks it sees join the set.
  PrefetcherOptions prefetch;
  prefetch.job = options_.job;
  prefetch.node = options_.node;
  prefetch.ranks = std::move(node_ranks);
  prefetch.arena_dir = options_.config.ckpt_arena_dir;
  prefetch.local_dir = options_.config.ckpt_dir;
  prefetch.remote_dir = options_.config.ckpt_remote_dir;
  prefetch.engine = options_.pull_engine != nullptr ? options_.pull_engine : MakeTransferEngine();
  prefetch.pull.fast_path = options_.pull_fast_path;
  prefetch.pull.min_bytes_per_second = options_.config.pull_min_rate;
  // Tries again only while the ranks, which wait FT_RESTORE_WAIT for the plan file, are
  // still likely to be starting.
  prefetch.retry_for = std::chrono::duration_cast<std::chrono::milliseconds>(options_.config.restore_wait) / 2;
  prefetch.destination_mapped = options_.prefetch_arena_mapped;
  prefetch.destination_unmapped = options_.prefetch_arena_unmapped;
  prefetcher_ = std::make_unique<Prefetcher>(std::move(prefetch));
  plan_sync_.SetGate(prefetcher_.get());
  plan_sync_.Claim();  // before anything else touches the plan file: a killed predecessor's goes
}

bool Daemon::EnsureConnected(uint64_t mono_ns) {
  // CLOCK_MONOTONIC is steady_clock's clock on Linux: the reconnect backoff runs on the tick's time.
  bool up = store_->Ensure(redis::Store::Clock::time_point(std::chrono::nanoseconds(mono_ns)));
  if (up && !was_connected_) {
    // A restarted worker resumes after the last command it executed. Until that read succeeds
    // the worker counts as not connected: a cluster whose shard is failing over answers the
    // connect and refuses the read, every tick, for seconds (one log line per tick, 238 in a
    // 2.4 s failover, before this waited for the read).
    if (command_cursor_.empty()) {
      redis::Reply reply;
      Status s = store_->Run(schema::GetCommandCursor(keys_, options_.node), &reply);
      if (s.ok() && !reply.is_string()) {
        // Where a worker of the grouped layout kept it (docs/redis-schema.md, "Slots"): an
        // upgraded worker must not run its node's old commands again.
        s = store_->Run(schema::GetLegacyCommandCursor(keys_, options_.node), &reply);
      }
      if (!s.ok()) {
        if (!cursor_read_failing_) {
          FT_LOG(Warn, Worker, "Redis at {} answers, but reading this node's command cursor failed: {}; "
                 "retrying each tick (the node's events wait in the queue)",
                 redis::Redacted(options_.endpoint), s.message());
        }
        cursor_read_failing_ = true;
        return false;
      }
      cursor_read_failing_ = false;
      command_cursor_ = reply.is_string() ? reply.str() : "-";
    }
    FT_LOG(Info, Worker, "connected to Redis at {}; {} writes pending",
           redis::Redacted(options_.endpoint), reporter_.pending());
    resend_membership_ = true;  // a restarted Redis lost what was written before
    timeouts_version_.clear();  // the master may have published meanwhile
    plan_sync_.ForgetVersion();  // and may have begun its plan versions anew
  }
  was_connected_ = up;
  return up;
}

void Daemon::PollTimeouts() {
  redis::Reply version;
  if (!store_->Run(schema::GetTimeoutsVersion(keys_), &version).ok()) return;
  if (!version.is_string() || version.str() == timeouts_version_) return;
  redis::Reply table;
  if (!store_->Run(schema::GetTimeouts(keys_), &table).ok()) return;
  if (!table.is_string()) return;
  proto::TimeoutTable parsed;
  Status s = proto::Decode(table.str(), &parsed);
  if (!s.ok()) {
    FT_LOG(Warn, Worker, "ignoring the master's timeout table (version {}): {}; keeping the "
           "timeouts in use", version.str(), s.message());
    timeouts_version_ = version.str();  // do not re-read the same bad value every poll
    return;
  }
  monitor_->SetTimeouts(parsed);
  timeouts_version_ = version.str();
  smallest_timeout_ms_ = parsed.default_ms;
  for (const auto& entry : parsed.entries) smallest_timeout_ms_ = std::min(smallest_timeout_ms_, entry.ms);
  FT_LOG(Info, Worker, "timeouts version {}: default {} ms, {} entries", parsed.version,
         parsed.default_ms, parsed.entries.size());
}

void Daemon::PollCommands(int64_t unix_ms) {
  schema::StreamRead<proto::Command> read;
  const std::string key = keys_.Commands(options_.node);
  if (!schema::ReadStream(*store_, schema::After(key, command_cursor_ == "-" ? "" : command_cursor_, 64), &read).ok()) {
    return;
  }
  std::vector<proto::CommandAck> acks;
  for (const schema::Entry<proto::Command>& e : read.entries) {
    const std::string& id = e.id;
    if (!e.ok()) {
      FT_LOG(Warn, Worker, "command {} on {} ignored: {}", id, key, e.why.message());
    } else {
      runner_.Execute(e.value, unix_ms, &acks);
    }
    command_cursor_ = id;
    // Persisted before the acks go out: a crash in between loses an ack, never repeats an action.
    redis::Reply ignored;
    if (!store_->Run(schema::SetCommandCursor(keys_, options_.node, id), &ignored).ok()) break;
  }
  for (const auto& ack : acks) reporter_.AddAck(ack);
}

void Daemon::CheckMembershipInRedis(uint64_t mono_ns) {
  if (mono_ns < next_membership_check_ns_ || !store_->connected() || resend_membership_) return;
  next_membership_check_ns_ = mono_ns + kMembershipCheckNs;
  if (reporter_.pending() > 0) return;  // what is queued is not in Redis yet
  std::vector<proto::Membership> memberships = monitor_->Memberships();
  if (memberships.empty()) return;
  std::vector<int> ranks;
  for (const auto& m : memberships) ranks.push_back(m.rank);
  redis::Reply reply;
  std::vector<schema::HashValue<proto::Membership>> held;
  if (!store_->Run(schema::GetRanks(keys_.Ranks(), ranks), &reply).ok() ||
      !schema::DecodeRankFields(ranks, reply, &held).ok()) {
    return;
  }
  // A value Redis holds, garbled or not, is there: only the ranks it lost are written again.
  std::string missing;
  for (int rank : ranks) {
    const bool there = std::any_of(held.begin(), held.end(),
                                   [&](const auto& v) { return v.field == schema::RankField(rank); });
    if (!there) missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
  }
  if (missing.empty()) return;
  FT_LOG(Warn, Worker, "Redis no longer holds the membership of rank(s) {} of this node: it lost "
         "its data (a restart without persistence, a failover, FLUSHALL); writing it again",
         missing);
  resend_membership_ = true;
  plan_sync_.ForgetVersion();
}

void Daemon::PollArenaGc(uint64_t mono_ns) {
  if (mono_ns < next_arena_gc_ns_ || !store_->connected()) return;
  next_arena_gc_ns_ = mono_ns + kArenaGcPollNs;
  JobGcFacts facts;
  Status s = ReadJobGcFacts(*store_, keys_, &facts);
  if (!s.ok()) {
    if (!arena_gc_failed_) {
      FT_LOG(Warn, Worker, "cannot read the job's state for removing its host arenas: {}; arenas "
             "stay until it can (or run `ftworker gc --job {}` after the job)", s.message(), options_.job);
    }
    arena_gc_failed_ = true;
    return;
  }
  arena_gc_failed_ = false;
  keeper_->SetGcFacts(facts, monitor_->Ranks());
}

std::vector<int> Daemon::TickKeeper(uint64_t mono_ns, int64_t unix_ms) {
  // The ranks Redis records on this node count too: a restarted worker serves their arenas.
  std::vector<int> node_ranks = monitor_->Ranks();
  node_ranks.insert(node_ranks.end(), transfer_->RecordedRanks().begin(), transfer_->RecordedRanks().end());
  keeper_->Tick(mono_ns, unix_ms, node_ranks);
  PublishCopies(keeper_->TakeReports(), /*buddy=*/false);
  return node_ranks;
}

void Daemon::PublishCopies(const std::vector<CkptReport>& reports, bool buddy) {
  for (const CkptReport& report : reports) {
    if (options_.metrics != nullptr) options_.metrics->OnCkptReport(report, buddy);
    if (report.removed && buddy) {
      reporter_.RemoveBuddyCopy(report.copy.step, report.copy.rank);
    } else if (report.removed) {
      reporter_.RemoveCkptCopy(report.copy.step, report.copy.rank);
    } else if (buddy) {
      reporter_.SetBuddyCopy(report.copy);
    } else {
      reporter_.SetCkptCopy(report.copy);
    }
  }
}

DaemonFigures Daemon::Figures() {
  DaemonFigures f;
  f.redis_connected = store_->connected();
  f.redis_dropped = reporter_.dropped();
  f.arena_huge_pages = arena_huge_pages_;
  if (replicator_ != nullptr) {
    f.replicating = true;
    f.pulled_bytes = replicator_->bytes_pulled();
    f.pulling_seconds = replicator_->seconds_pulling();
  }
  return f;
}

void Daemon::Tick(uint64_t mono_ns, int64_t unix_ms) {
  std::vector<proto::Event> events;
  monitor_->Tick(mono_ns, unix_ms, &events);
  // An ended rank's last copies (a preempted rank saves twice on its way out) reach Redis before
  // its exit event does: the master echoes an end only in a plan built on the copies read after
  // it read the end (CkptRound::NoteEnds), and this node's plan file waits for that echo.
  const bool ended = std::any_of(events.begin(), events.end(), [](const proto::Event& e) {
    return e.kind == proto::EventKindName(proto::EventKind::kExit);
  });
  if (ended) {
    keeper_->ScanSoon();
    (void)TickKeeper(mono_ns, unix_ms);
    if (store_->connected() && reporter_.pending() > 0) (void)reporter_.Flush(*store_);
    // The ended ranks' memberships in this tick's report, not at the next interval: the master
    // marks a job finished by them, and a worker stopped right after its ranks ended (a Slurm
    // epilog, as soon as the job script returns) has no next interval.
    next_report_ns_ = 0;
  }
  for (const auto& event : events) {
    FT_LOG(Info, Worker, "{} event for rank {}: {}", event.kind, event.rank, event.message);
    reporter_.AddEvent(event);
    if (options_.metrics != nullptr) options_.metrics->OnEvent(event);
    // A relaunch in place may start before the master heard of this end and read the copies the
    // rank saved on its way out: its ft_restore waits for the master's echo of the end. A rank
    // this worker stopped too: a plan published after the stop was decided need not be built on
    // them (a campaign seed: a plan republished for an eviction, before the teardown's copies
    // came, sent half the ranks back to scratch while the other half restored).
    if (event.kind == proto::EventKindName(proto::EventKind::kExit) && (!event.clean || event.code != 0)) {
      plan_sync_.NoteRankEnded(event.rank,
                               event.code < 0 ? fmt::format("signal {}", -event.code) : fmt::format("exit status {}", event.code),
                               mono_ns, event.unix_ms);
    }
  }
  ReportHardware(unix_ms);
  const MasterNews news = TakeNews(mono_ns);
  Report(mono_ns, unix_ms);
  if (mono_ns >= next_heartbeat_ns_) {
    reporter_.Heartbeat(getpid(), options_.host, monitor_->Ranks(), unix_ms);
    next_heartbeat_ns_ = mono_ns + kHeartbeatNs;
  }
  std::vector<proto::CommandAck> acks;
  runner_.Poll(unix_ms, &acks);
  for (const auto& ack : acks) reporter_.AddAck(ack);
  // A rank answered (a save, most likely): its copy is reported with the ack, not up to a scan
  // interval later — the master counts the copies of a save before it stops the job.
  if (!acks.empty()) keeper_->ScanSoon();
  const std::vector<int> node_ranks = TickKeeper(mono_ns, unix_ms);

  // Buddy copies of another node's ranks: the pulls run on the replicator's thread.
  if (replicator_ != nullptr) {
    replicator_->Tick(mono_ns, store_->connected() ? store_.get() : nullptr);
    PublishCopies(replicator_->TakeReports(), /*buddy=*/true);
  }

  // Redis is asked only while connected; the served arenas are looked after either way.
  transfer_->Tick(mono_ns, unix_ms, *store_);

  // A replacement node's prefetch runs on its own threads; the plan file follows it even while
  // Redis is away.
  if (prefetcher_ != nullptr) {
    prefetcher_->AddRanks(node_ranks);
    prefetcher_->Tick(mono_ns, unix_ms, store_->connected() ? store_.get() : nullptr);
    plan_sync_.Refresh();
  }

  if (options_.metrics != nullptr) options_.metrics->Refresh(mono_ns, *monitor_, Figures());
  if (!EnsureConnected(mono_ns)) return;
  // Events first: they are what the master waits for.
  if (reporter_.pending() > 0) (void)reporter_.Flush(*store_);
  CheckMembershipInRedis(mono_ns);
  if (store_->connected()) plan_sync_.Poll(mono_ns, *store_);
  // Retention never removes the step a restore would read (the master's newest verified one).
  if (plan_sync_.have_plan()) {
    keeper_->SetPlan(plan_sync_.planned_step());
    if (replicator_ != nullptr) replicator_->SetPlannedStep(plan_sync_.planned_step());
  }
  PollArenaGc(mono_ns);
  PollMaster(mono_ns, unix_ms, news);
}

void Daemon::ReportHardware(int64_t unix_ms) {
  if (options_.health == nullptr) return;
  std::vector<proto::HwSignal> signals = options_.health->Take();
  if (signals.empty()) return;
  std::vector<health::RankDevice> ranks;
  for (const NodeMonitor::RankHardware& r : monitor_->Hardware()) ranks.push_back({r.rank, r.pid, r.gpu_bus_id});
  rank_devices_.Update(ranks);
  for (proto::HwSignal& signal : signals) {
    rank_devices_.Attach(&signal);
    const int rank = signal.ranks.size() == 1 ? signal.ranks.front() : -1;  // -1: the node's
    proto::Event event = proto::NewEvent(proto::EventKind::kHardware, rank, options_.node,
                                         signal.unix_ms > 0 ? signal.unix_ms : unix_ms);
    std::string whose = "the node";
    if (!signal.ranks.empty()) {
      whose = "rank";
      for (size_t i = 0; i < signal.ranks.size(); ++i) whose += (i ? "," : " ") + std::to_string(signal.ranks[i]);
    }
    event.message = fmt::format("{}{} {} on {} ({}): {}", signal.critical ? "critical: " : "", signal.kind,
                                signal.value, signal.device, whose, signal.detail);
    if (signal.critical) {
      FT_LOG(Warn, Worker, "hardware: {}", event.message);
    } else {
      FT_LOG(Info, Worker, "hardware: {}", event.message);
    }
    event.hw = std::move(signal);
    reporter_.AddEvent(event);
    if (options_.metrics != nullptr) options_.metrics->OnEvent(event);
  }
}

MasterNews Daemon::TakeNews(uint64_t mono_ns) {
  MasterNews news = watch_ != nullptr ? watch_->Take() : MasterNews{};
  if (news.window_open) {
    const std::string named = news.window_ranks ? news.window_ranks->Format() : "*";
    if (*news.window_open && (!window_open_ || named != (window_ranks_ ? window_ranks_->Format() : "*"))) {
      FT_LOG(Info, Worker, "the master's incident window {} asks for the progress tables of {} every "
             "{} ms until it closes", news.window,
             news.window_ranks ? "ranks " + named.substr(0, 64) : std::string("every rank"),
             std::chrono::duration_cast<std::chrono::milliseconds>(options_.config.report_interval).count());
      next_report_ns_ = 0;  // the master waits for these tables: now, not at the next report
    }
    window_open_ = *news.window_open;
    window_ranks_ = news.window_ranks;
    window_until_ns_ = mono_ns + kWindowNoticeLifeNs;
  } else if (window_open_ && mono_ns >= window_until_ns_) {
    FT_LOG(Warn, Worker, "the master's incident window notice was not renewed for {} s: back to "
           "writing calm ranks' tables only on a change", kWindowNoticeLifeNs / 1000 / kMs);
    window_open_ = false;
    window_ranks_.reset();
  }
  return news;
}

void Daemon::Report(uint64_t mono_ns, int64_t unix_ms) {
  if (mono_ns >= next_report_ns_) {
    // Unheard notices would leave the master without the tables it waits for: every table
    // then, as before notices. Half the smallest timeout: a rank that waits (or is silent)
    // that long writes its table once then, before any window opens (report_pacing.h).
    const bool hearing = hearing_master();
    double timeout_ms = static_cast<double>(
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.config.timeout_floor).count());
    if (smallest_timeout_ms_ > 0) timeout_ms = std::min(timeout_ms, smallest_timeout_ms_);
    for (const auto& progress : monitor_->Progress()) {
      const bool asked =
          !hearing || (window_open_ && (!window_ranks_ || window_ranks_->Contains(progress.rank)));
      if (progress_pacer_.ShouldWrite(progress, timeout_ms / 2, asked, unix_ms)) {
        reporter_.SetProgress(progress);
      }
    }
    // After a reconnect too: a restarted Redis has lost what was written before.
    if (monitor_->TakeMembershipChanged() || resend_membership_) {
      if (resend_membership_) {
        reporter_.ForgetMemberships();  // unchanged values too
        progress_pacer_.Forget();       // and every table and summary, at their next turn
        summary_pacer_.Forget();
        keeper_->ReportAll();           // and the node's checkpoint copies
        if (replicator_ != nullptr) replicator_->ReportAll();  // and its buddy copies
      }
      resend_membership_ = false;
      for (const auto& membership : monitor_->Memberships()) reporter_.SetMembership(membership);
    }
    next_report_ns_ = mono_ns + static_cast<uint64_t>(options_.config.report_interval.count());
  }
  if (mono_ns >= next_summary_ns_) {
    for (auto& summary : monitor_->TakeSummaries(unix_ms)) {
      if (options_.metrics != nullptr) options_.metrics->OnSummary(summary);  // the window's own
      if (summary_pacer_.Next(&summary, unix_ms)) reporter_.SetSummary(summary);
    }
    next_summary_ns_ = mono_ns + static_cast<uint64_t>(options_.config.summary_interval.count());
  }
}

void Daemon::PollMaster(uint64_t mono_ns, int64_t unix_ms, const MasterNews& news) {
  const bool hearing = hearing_master();
  plan_sync_.StretchPolls(hearing ? kSlowPollNs : 0);
  transfer_->StretchSecretPolls(hearing ? kSlowPollNs : 0);
  if (news.everything || news.restore) plan_sync_.PollSoon();
  if (news.everything || news.secret) transfer_->CheckSecretSoon();
  const bool due = mono_ns >= next_master_poll_ns_ || news.everything;
  if (!store_->connected() || !(due || news.timeouts || news.commands)) return;
  if (due || news.timeouts) PollTimeouts();
  if (store_->connected() && (due || news.commands)) PollCommands(unix_ms);
  if (due) next_master_poll_ns_ = mono_ns + (hearing ? kSlowPollNs : kMasterPollNs);
}

void Daemon::Run(const std::atomic<bool>& stop) {
  FT_LOG(Info, Worker, "ftworker for job {} on node {} (Redis {})", options_.job, options_.node,
         redis::Redacted(options_.endpoint));
  // Once per node, where operators look: the page size every process mapping an arena pays.
  const ckpt::ArenaPages pages = ckpt::ArenaPagesOfDir(options_.config.ckpt_arena_dir);
  FT_LOG(Info, Worker, "checkpoint arenas in {}: {}", options_.config.ckpt_arena_dir, ckpt::ArenaPagesText(pages));
  arena_huge_pages_ = pages.known ? (pages.huge ? 1 : 0) : -1;
  const auto tick = std::max<std::chrono::nanoseconds>(options_.config.worker_tick,
                                                       std::chrono::milliseconds(1));
  auto next = std::chrono::steady_clock::now();
  while (!stop.load(std::memory_order_relaxed)) {
    Tick(MonoNs(), UnixMs());
    next += tick;
    auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // a slow round (Redis outage) does not cause a burst after it
    std::this_thread::sleep_until(next);
  }
  // Last words: one more look at the ranks (a rank that exited since the last tick — often the
  // reason the worker is being stopped — is reported), then whatever is pending, once, if
  // Redis is there.
  Tick(MonoNs(), UnixMs());
  const bool up = EnsureConnected(MonoNs());
  if (up && reporter_.pending() > 0) (void)reporter_.Flush(*store_);
  transfer_->Stop(up ? store_.get() : nullptr);
  plan_sync_.RemoveFile();
  FT_LOG(Info, Worker, "ftworker stopped ({} events reported, {} dropped)", reporter_.events_added(),
         reporter_.dropped());
}

}  // namespace ft::worker

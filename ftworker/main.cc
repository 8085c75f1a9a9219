// ftworker: one per node. Reads the segments of every local rank of a job, detects Error,
// Timeout and Slowdown, reports through Redis, runs the master's commands.
//   ftworker --job J [--redis redis://[user@]host:port[/db]] [--node ID] [--ranks 4-7]
//   ftworker status [--job J] [--json]
//   ftworker pull --from NODE --region arena/<step>/<rank> --out FILE [--job J] [--redis URL]
//   ftworker gc --job J [--arena-dir D] [--dry-run] [--release] [--redis URL]
// Settings come from the FT_* table (docs/configuration.md); flags override FT_JOB, FT_REDIS,
// FT_NODE_ID. The password belongs in FT_REDIS_PASSWORD, not in the URL on the command line.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/environment.h"
#include "common/launcher_identity.h"
#include "common/log.h"
#include "common/program_start.h"
#include "ftworker/daemon.h"
#include "ftworker/ckpt/gc_command.h"
#include "ftworker/health/health_sampler.h"
#include "ftworker/transfer/listen_address.h"
#include "ftworker/monitor/node_monitor.h"
#include "ftworker/prefetch/prefetcher.h"
#include "ftworker/transfer/pull_command.h"
#include "ftworker/status_view.h"
#include "ftworker/worker_metrics.h"
#include "metrics/exporter.h"
#include "redis/url.h"
#include "transfer_engine/verbs/verbs_setup.h"

namespace {

constexpr const char* kUsage =
    "usage: ftworker --job J [--redis URL] [--node ID] [--ranks R]\n"
    "       ftworker status [--job J] [--json]\n"
    "       ftworker pull --from NODE --region arena/<step>/<rank> --out FILE [--job J] [--redis URL]\n"
    "                     [--secret-file F] [--connections N]\n"
    "       ftworker gc --job J [--arena-dir D] [--dry-run] [--release] [--redis URL]\n"
    "\n"
    "  --job J      the job (default: FT_JOB, else the launcher's job id)\n"
    "  --redis URL  redis://[user@]host:port[/db] (default: FT_REDIS); the password goes in\n"
    "               FT_REDIS_PASSWORD so no process listing shows it\n"
    "  --node ID    this node's name in reports (default: FT_NODE_ID, else the host name)\n"
    "  --shm-dir D  where POSIX shared memory lives (default /dev/shm)\n"
    "  --ranks R    the global ranks the scheduler will start on this node, e.g. 4-7 (default:\n"
    "               FT_NODE_RANKS): their planned shards are pulled from other nodes first\n"
    "  --json       status: one JSON object per rank\n"
    "  pull         fetch one checkpoint copy (arena/<step>/<rank> or local/<step>/<rank>) from\n"
    "               NODE's worker with the job's secret (from Redis, or the first line of F),\n"
    "               every chunk verified, into FILE and FILE.manifest\n"
    "  gc           remove the job's host arenas on this node that are no longer needed (the\n"
    "               job finished or its plan names a newer step, the copy is persisted in a\n"
    "               tier and is not the planned/newest step, no live process holds it); one\n"
    "               line per arena says what was removed or kept and why (a job's epilogue)\n"
    "  --arena-dir D  gc: the arena directory (default: FT_CKPT_ARENA_DIR)\n"
    "  --dry-run    gc: say what would be removed, remove nothing\n"
    "  --release    gc: the finished job will not be relaunched: its planned and newest steps go\n"
    "               too, once persisted in a tier\n"
    "Every FT_* setting is listed by ft-print-config and in docs/configuration.md.\n";

struct Flags {
  bool status = false;
  bool pull = false;
  bool json = false;
  bool gc = false;
  bool dry_run = false;
  bool release = false;
  std::string arena_dir;
  std::string job, redis, node, shm_dir = "/dev/shm", ranks;
  std::string from, region, out, secret_file, connections = "4";
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  int i = 1;
  if (i < argc && std::strcmp(argv[i], "status") == 0) {
    flags->status = true;
    ++i;
  } else if (i < argc && std::strcmp(argv[i], "pull") == 0) {
    flags->pull = true;
    ++i;
  } else if (i < argc && std::strcmp(argv[i], "gc") == 0) {
    flags->gc = true;
    ++i;
  }
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ftworker: %s needs a value (try --help)\n", arg.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--job") {
      if (!value(&flags->job)) return false;
    } else if (arg == "--redis") {
      if (!value(&flags->redis)) return false;
    } else if (flags->gc && arg == "--arena-dir") {
      if (!value(&flags->arena_dir)) return false;
    } else if (flags->gc && arg == "--dry-run") {
      flags->dry_run = true;
    } else if (flags->gc && arg == "--release") {
      flags->release = true;
    } else if (flags->gc) {
      std::fprintf(stderr, "ftworker gc: unknown argument '%s' (gc takes --job J, --arena-dir D, "
                   "--dry-run, --release, --redis URL)\n", arg.c_str());
      return false;
    } else if (arg == "--node") {
      if (!value(&flags->node)) return false;
    } else if (arg == "--shm-dir") {
      if (!value(&flags->shm_dir)) return false;
    } else if (arg == "--ranks") {
      if (!value(&flags->ranks)) return false;
    } else if (flags->pull && arg == "--from") {
      if (!value(&flags->from)) return false;
    } else if (flags->pull && arg == "--region") {
      if (!value(&flags->region)) return false;
    } else if (flags->pull && arg == "--out") {
      if (!value(&flags->out)) return false;
    } else if (flags->pull && arg == "--secret-file") {
      if (!value(&flags->secret_file)) return false;
    } else if (flags->pull && arg == "--connections") {
      if (!value(&flags->connections)) return false;
    } else if (arg == "--json") {
      flags->json = true;
    } else {
      std::fprintf(stderr, "ftworker: unknown argument '%s' (try --help)\n", arg.c_str());
      return false;
    }
  }
  return true;
}

// What every mode starts from: the settings (flags override FT_JOB, FT_REDIS, FT_NODE_ID), the
// job and this node.
struct Start {
  Flags flags;
  ft::Environment env = ft::Environment::FromProcess();
  ft::Config config;
  std::string host;
  std::string job, node;
};

// 0, or the exit code (the error printed).
int LoadStart(Start* st) {
  ft::Status s = ft::LoadProgramConfig("ftworker", ft::Subsystem::kWorker, st->env, &st->config);
  if (!s.ok()) {
    std::fprintf(stderr, "ftworker: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (std::string w = ft::redis::PasswordInArgumentWarning(st->flags.redis, "--redis"); !w.empty()) {
    FT_LOG(Warn, Worker, "{}", w);
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  st->host = host;
  ft::LauncherIdentity identity = ft::ResolveLauncherIdentity(st->config, st->env, host);
  st->job = !st->flags.job.empty() ? st->flags.job : identity.job;
  if (st->job.empty()) {
    // The launcher's id names no job (torchrun's "none", a per-launch random id): a worker
    // under a guessed name would never meet its ranks' segments or its master.
    std::fprintf(stderr, "ftworker: %s (or pass --job)\n", identity.job_error.c_str());
    return 2;
  }
  st->node = !st->flags.node.empty() ? st->flags.node : identity.node;
  return 0;
}

int RunGcMode(const Start& st) {
  ft::worker::GcCommand gc;
  gc.sweep.job = st.job;
  gc.sweep.arena_dir = !st.flags.arena_dir.empty() ? st.flags.arena_dir : st.config.ckpt_arena_dir;
  gc.sweep.local_dir = st.config.ckpt_dir;
  gc.sweep.remote_dir = st.config.ckpt_remote_dir;
  gc.sweep.dry_run = st.flags.dry_run;
  gc.release = st.flags.release;
  ft::Status s = ft::redis::EndpointFromConfig(st.config, st.flags.redis, &gc.redis);
  if (s.ok()) {
    gc.have_redis = true;
  } else if (s.code() == ft::StatusCode::kNotFound) {
    gc.no_redis_why = "FT_REDIS is not set";
  } else {
    std::fprintf(stderr, "ftworker gc: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  return ft::worker::RunGc(gc);
}

int RunPullMode(const Start& st) {
  ft::worker::PullCommand pull;
  pull.job = st.job;
  pull.from = st.flags.from;
  pull.region = st.flags.region;
  pull.out = st.flags.out;
  pull.secret_file = st.flags.secret_file;
  pull.connections = std::atoi(st.flags.connections.c_str());
  pull.min_bytes_per_second = st.config.pull_min_rate;
  ft::Status s = ft::redis::EndpointFromConfig(st.config, st.flags.redis, &pull.redis);
  if (!s.ok()) {
    std::fprintf(stderr, "ftworker: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  return ft::worker::RunPull(pull);
}

// The verbs fast path where this node has an RDMA device (libibverbs loaded at run time);
// otherwise, said once, TCP alone. Each served arena is registered with the NIC when the
// worker first maps it, never while a peer waits.
void OpenFastPath(const ft::Config& config, ft::rdma::VerbsTransport* verbs, ft::worker::DaemonOptions* options) {
  ft::Status s = ft::rdma::OpenVerbsTransport(config, nullptr, verbs);
  if (!s.ok()) {
    FT_LOG(Info, Worker, "no RDMA verbs ({}): this node serves and pulls copies over TCP",
           s.message());
    return;
  }
  FT_LOG(Info, Worker, "RDMA device {}: peers pull this node's copies over RDMA READ, TCP as the "
         "fallback", verbs->device->name());
  // Each arena is registered when mapped; a registration that fails costs that arena the
  // fast path, nothing else.
  auto register_or_tcp = [](auto* endpoint, const char* what, const char* fallback) {
    return [endpoint, what, fallback](auto* data, uint64_t bytes) {
      ft::Status r = endpoint->Register(data, bytes);
      if (!r.ok()) {
        FT_LOG(Warn, Worker, "registering {} with the RDMA device failed: {}; {}", what, r.message(), fallback);
      }
    };
  };
  options->fast_path = verbs->server.get();
  options->arena_mapped = register_or_tcp(verbs->server.get(), "an arena", "peers pull it over TCP");
  options->arena_unmapped = [server = verbs->server.get()](const uint8_t* data, uint64_t bytes) {
    server->Forget(data, bytes);
  };
  // A replacement node's prefetch reads over RDMA from peers that offer it, straight into
  // its prefetch arenas, each registered when mapped and forgotten before it is unmapped.
  options->pull_fast_path = verbs->client.get();
  options->prefetch_arena_mapped =
      register_or_tcp(verbs->client.get(), "a prefetch arena", "its pull runs over TCP");
  options->prefetch_arena_unmapped = [client = verbs->client.get()](const uint8_t* data, uint64_t bytes) {
    client->Forget(data, bytes);
  };
}

// The daemon until SIGTERM or SIGINT, with its metrics exporter and health sampler.
int RunDaemon(const Start& st) {
  const ft::Config& config = st.config;
  ft::worker::DaemonOptions options;
  options.job = st.job;
  options.node = st.node;
  options.host = st.host;
  options.config = config;
  if (!st.flags.ranks.empty()) options.config.node_ranks = st.flags.ranks;
  std::vector<int> node_ranks;
  ft::Status s = ft::worker::ParseNodeRanks(options.config.node_ranks, &node_ranks);
  if (!s.ok()) {
    std::fprintf(stderr, "ftworker: --ranks / FT_NODE_RANKS: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  ft::worker::ListenChoice listen =
      ft::worker::ChooseListenAddress(config.listen, st.host, ft::worker::ResolveHost(st.host));
  if (!listen.warning.empty()) FT_LOG(Warn, Worker, "{}", listen.warning);
  options.listen_address = listen.address;
  ft::rdma::VerbsTransport verbs;
  OpenFastPath(config, &verbs, &options);
  s = ft::redis::EndpointFromConfig(config, st.flags.redis, &options.endpoint);
  if (!s.ok()) {
    std::fprintf(stderr, "ftworker: %s\n", std::string(s.message()).c_str());
    return 2;
  }

  const std::atomic<bool>& stop = ft::StopOnSignals();
  signal(SIGPIPE, SIG_IGN);

  ft::worker::NodeMonitorOptions monitor_options =
      ft::worker::NodeMonitorOptions::FromConfig(config, st.job, st.node);
  monitor_options.shm_dir = st.flags.shm_dir;
  ft::worker::NodeMonitor monitor(std::move(monitor_options));
  // Metrics (README "Metrics"): filled by the loop, served on the exporter's thread.
  ft::metrics::Exporter exporter;
  (void)exporter.Start({.listen = config.metrics_listen, .default_port = ft::metrics::kWorkerPort,
                        .textfile = config.metrics_textfile, .interval = config.metrics_interval,
                        .subsystem = ft::Subsystem::kWorker, .routes = {}});
  ft::worker::WorkerMetrics worker_metrics(&exporter.registry(), st.job, st.node,
                                           static_cast<uint64_t>(config.metrics_interval.count()));
  options.metrics = &worker_metrics;
  options.persist = worker_metrics.WrapPersist(std::move(options.persist));
  options.make_transfer_server = worker_metrics.WrapTransferServer(std::move(options.make_transfer_server));
  // Hardware and system signals (FT_HEALTH): NVML, the RDMA ports' counters, the kernel log,
  // read on the sampler's own thread.
  std::unique_ptr<ft::worker::health::HealthSampler> health;
  if (config.health) {
    health = std::make_unique<ft::worker::health::HealthSampler>(ft::worker::health::HealthSamplerOptions{
        .nvml_library = config.nvml_library,
        .sysfs_root = config.sysfs_root,
        .kmsg_path = config.kmsg_path,
        .interval = std::chrono::duration_cast<std::chrono::milliseconds>(config.health_interval)});
    health->Start();
    options.health = health.get();
  }
  {
    ft::worker::Daemon daemon(std::move(options), &monitor);
    daemon.Run(stop);
  }
  exporter.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Start st;
  if (!ParseFlags(argc, argv, &st.flags)) return 2;
  if (int rc = LoadStart(&st); rc != 0) return rc;
  if (st.flags.status) {
    std::fputs(ft::worker::LocalStatus(st.job, st.flags.shm_dir, st.flags.json).c_str(), stdout);
    return 0;
  }
  if (st.flags.gc) return RunGcMode(st);
  if (st.flags.pull) return RunPullMode(st);
  return RunDaemon(st);
}

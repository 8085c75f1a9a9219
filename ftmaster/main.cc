// ftmaster: one per job (two for a standby pair). Decides what a hang, crash or straggler
// means for the job and carries the decision out through Redis.
//   ftmaster run --job J [--redis URL] [--topology dp=D,tp=T,pp=P] [--order tp-dp-pp]
//                [--id NAME] [--redis-env FILE] [--exit-when-stopped]
//   ftmaster status|incidents|timeouts|evicted|checkpoints|goodput|save --job J [--redis URL]
//            [--redis-env FILE] [--json]
//   ftmaster acl --job J [--aclfile]
//   ftmaster nodes [--lemons] [--json] | --cordon NODE --reason TEXT [--for 24h] | --uncordon NODE
//                  | --cordon-commands slurm|k8s       (no job: nodes across jobs)
// Settings come from the FT_* table (docs/configuration.md); flags override FT_JOB and
// FT_REDIS. The password belongs in FT_REDIS_PASSWORD (or the --redis-env file), never in a
// URL on the command line.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "common/config.h"
#include "common/environment.h"
#include "common/job_name.h"
#include "common/log.h"
#include "ftmaster/acl.h"
#include "ftmaster/cli.h"
#include "ftmaster/cli_nodes.h"
#include "ftmaster/core/slow_policy.h"
#include "ftmaster/embedded_redis.h"
#include "ftmaster/master_loop.h"
#include "ftmaster/cli_goodput.h"
#include "ftmaster/master_metrics.h"
#include "ftmaster/page/reader.h"
#include "metrics/exporter.h"
#include "proto/keys.h"
#include "redis/client.h"
#include "redis/cluster.h"
#include "redis/url.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

constexpr const char* kUsage =
    "usage: ftmaster run --job J [--redis URL] [--topology dp=D,tp=T,pp=P] [--order tp-dp-pp]\n"
    "                    [--id NAME] [--redis-env FILE] [--exit-when-stopped]\n"
    "       ftmaster status|incidents|timeouts|evicted|checkpoints|goodput|save --job J [--redis URL]\n"
    "                    [--redis-env FILE] [--json]\n"
    "       ftmaster acl --job J [--aclfile]\n"
    "       ftmaster nodes [--lemons] [--json] [--limit N]\n"
    "       ftmaster nodes --cordon NODE --reason TEXT [--for 24h] | --uncordon NODE\n"
    "       ftmaster nodes --cordon-commands slurm|k8s\n"
    "\n"
    "  run        lead the job (or stand by while another master leads): adaptive timeouts,\n"
    "             hang/crash/straggler incidents, save-then-stop decisions, evictions\n"
    "  status     one row per rank (node, state, step, step time, last event) and the topology\n"
    "  incidents  the incident stream (--json: one Incident per line)\n"
    "  timeouts   the published timeout table\n"
    "  evicted    the nodes a scheduler should not use again\n"
    "  checkpoints  checkpoint steps, newest first: verdict, shards verified, copies, tiers,\n"
    "             sdc ranks, and the step the restore plan names\n"
    "  goodput    where the job's GPU time went: ETTR, productive and lost rank-seconds by cause\n"
    "             (startup, detection, save-stop, relaunch, redone, slowed, idle), per incident\n"
    "  save       ask every rank for a checkpoint at its next step boundary (prints the id)\n"
    "  stacks     --rank R: the rank's stacks now (native, and Python frames of a python/ft rank),\n"
    "             taken by its node's worker; waits up to 10 s for them\n"
    "  acl        the job's Redis ACL users (worker, master, read-only operator) as ACL SETUSER\n"
    "             lines for redis-cli, or --aclfile: lines for a Redis ACL file; no Redis needed\n"
    "  nodes      every job's nodes, worst first by their lemon score (evictions, hardware\n"
    "             signals, crashes, suspicions, slow episodes, recent ones weighing more), with\n"
    "             why; --lemons: only the lemons. --cordon NODE --reason TEXT [--for DURATION]:\n"
    "             keep NODE out of every job (each job's eviction list carries it; runs\n"
    "             FT_CORDON_COMMAND if set); --uncordon NODE; --cordon-commands slurm|k8s: the\n"
    "             scheduler's drain line for each cordoned node (docs/nodes.md). No --job needed\n"
    "\n"
    "  --job J              the job (default: FT_JOB)\n"
    "  --redis URL          redis://[user@]host:port[/db] (default: FT_REDIS); the password goes\n"
    "                       in FT_REDIS_PASSWORD. run with neither starts an embedded Redis on\n"
    "                       127.0.0.1 (random port and password) that lives as long as ftmaster\n"
    "  --redis-env FILE     run: where the embedded Redis's FT_REDIS and FT_REDIS_PASSWORD go\n"
    "                       (mode 0600; default ft-<job>.redis.env; workers: set -a; . FILE);\n"
    "                       other commands: read the address and password from FILE (default:\n"
    "                       that file when it exists and neither --redis nor FT_REDIS is set)\n"
    "  --topology SIZES     dp=D,tp=T,pp=P (default: inferred from communicator membership)\n"
    "  --order ORDER        rank order, first-named fastest (default tp-dp-pp)\n"
    "  --id NAME            this master's name in the leader lease (default host:pid:random)\n"
    "  --exit-when-stopped  run: exit 0 once the job is stopped (or finished: every rank exited cleanly)\n"
    "  --json               machine-readable output\n"
    "Settings (FT_HANG_WINDOW, FT_LEASE, FT_SAVE_DEADLINE, ...): ft-print-config and\n"
    "docs/configuration.md.\n";

struct Flags {
  std::string command;
  std::string job, redis, topology, order, id, redis_env, rank;
  bool exit_when_stopped = false;
  bool json = false;
  bool aclfile = false;
  // nodes
  bool lemons = false;
  std::string cordon, uncordon, reason, for_text, cordon_commands, limit;
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "ftmaster: %s (try --help)\n", message.c_str());
  return 2;
}

// 0: parsed; 1: --help printed; 2: a usage error (printed).
int ParseFlags(int argc, char** argv, Flags* flags) {
  int i = 1;
  if (i < argc && argv[i][0] != '-') {
    flags->command = argv[i++];
    if (flags->command != "run" && flags->command != "status" && flags->command != "incidents" &&
        flags->command != "timeouts" && flags->command != "evicted" &&
        flags->command != "checkpoints" && flags->command != "goodput" && flags->command != "save" &&
        flags->command != "acl" && flags->command != "nodes" &&
        flags->command != "stacks") {
      return Usage("unknown command '" + flags->command + "'");
    }
  }
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    std::string inline_value;
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      inline_value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      has_inline = true;
    }
    auto value = [&](std::string* out) {
      if (has_inline) {
        *out = inline_value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string* target = nullptr;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 1;
    } else if (arg == "--job") {
      target = &flags->job;
    } else if (arg == "--redis") {
      target = &flags->redis;
    } else if (arg == "--topology") {
      target = &flags->topology;
    } else if (arg == "--order") {
      target = &flags->order;
    } else if (arg == "--id") {
      target = &flags->id;
    } else if (arg == "--redis-env") {
      target = &flags->redis_env;
    } else if (arg == "--rank") {
      target = &flags->rank;
    } else if (arg == "--exit-when-stopped" && !has_inline) {
      flags->exit_when_stopped = true;
      continue;
    } else if (arg == "--json" && !has_inline) {
      flags->json = true;
      continue;
    } else if (arg == "--aclfile" && !has_inline) {
      flags->aclfile = true;
      continue;
    } else if (arg == "--lemons" && !has_inline) {
      flags->lemons = true;
      continue;
    } else if (arg == "--cordon") {
      target = &flags->cordon;
    } else if (arg == "--uncordon") {
      target = &flags->uncordon;
    } else if (arg == "--reason") {
      target = &flags->reason;
    } else if (arg == "--for") {
      target = &flags->for_text;
    } else if (arg == "--cordon-commands") {
      target = &flags->cordon_commands;
    } else if (arg == "--limit") {
      target = &flags->limit;
    } else {
      return Usage(std::string("unknown argument '") + argv[i] + "'");
    }
    if (!value(target)) return Usage(arg + " needs a value");
  }
  if (flags->command.empty()) {
    return Usage("no command given: run, status, incidents, timeouts, evicted, checkpoints, goodput, save, "
                 "stacks or acl");
  }
  const bool run = flags->command == "run";
  if (run && flags->json) {
    return Usage("--json applies to status, incidents, timeouts, evicted, checkpoints, goodput, save and stacks");
  }
  if (!run && flags->exit_when_stopped) return Usage("--exit-when-stopped applies to run");
  if (!run && !flags->id.empty()) return Usage("--id applies to run");
  if (flags->aclfile && flags->command != "acl") return Usage("--aclfile applies to acl");
  if (flags->command == "acl" && flags->json) return Usage("--json does not apply to acl");
  if (flags->command != "nodes" && (flags->lemons || !flags->cordon.empty() || !flags->uncordon.empty() ||
                                    !flags->reason.empty() || !flags->for_text.empty() ||
                                    !flags->cordon_commands.empty() || !flags->limit.empty())) {
    return Usage("--lemons, --cordon, --uncordon, --reason, --for, --cordon-commands and --limit apply to nodes");
  }
  return 0;
}

bool FileExists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

int64_t UnixMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int Fail(const ft::Status& s) {
  std::fprintf(stderr, "ftmaster: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  int parsed = ParseFlags(argc, argv, &flags);
  if (parsed == 1) return 0;
  if (parsed != 0) return 2;

  ft::Environment env = ft::Environment::FromProcess();
  ft::Config config;
  std::vector<std::string> warnings, not_settings;
  ft::Status s = ft::Config::Load(env, &config, &warnings, &not_settings);
  if (!s.ok()) {
    std::fprintf(stderr, "ftmaster: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  s = ft::log::Configure(config.log_level, config.log_subsystems);
  if (!s.ok()) std::fprintf(stderr, "ftmaster: %s\n", std::string(s.message()).c_str());
  if (!ft::master::ParseSlowAction(config.slow_action)) {
    std::fprintf(stderr, "ftmaster: FT_SLOW_ACTION=%s: expected report or evict\n", config.slow_action.c_str());
    return 2;
  }
  for (const auto& w : warnings) FT_LOG(Warn, Master, "{}", w);
  if (!not_settings.empty()) {
    FT_LOG(Info, Master, "ignoring {} FT_* variable{} that name no ft setting (another program's?): {}",
           not_settings.size(), not_settings.size() == 1 ? "" : "s", fmt::join(not_settings, ", "));
  }
  if (std::string w = ft::redis::PasswordInArgumentWarning(flags.redis, "--redis"); !w.empty()) {
    FT_LOG(Warn, Master, "{}", w);
  }

  const std::string job = !flags.job.empty() ? flags.job : config.job;
  // nodes: across jobs (no job needed); its flags are checked before Redis is.
  ft::master::NodesOptions nodes;
  if (flags.command == "nodes") {
    s = ft::master::NodesOptionsFromFlags(config, flags.lemons, flags.cordon, flags.uncordon, flags.reason,
                                          flags.for_text, flags.cordon_commands, flags.limit, &nodes);
    if (!s.ok()) return Usage(std::string(s.message()));
  }
  if (job.empty() && flags.command != "nodes") {
    std::fprintf(stderr, "ftmaster: --job is required (or set FT_JOB) (try --help)\n");
    return 2;
  }
  if (flags.command == "acl") {
    std::string guide = ft::master::AclGuide(job, flags.aclfile);
    std::fputs(guide.c_str(), stderr);
    std::string text = ft::master::AclText(job, flags.aclfile);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  // The job as every other file names it (common/job_name.h): two jobs never share the file.
  const std::string default_env_file = "ft-" + ft::JobToken(job) + ".redis.env";
  signal(SIGPIPE, SIG_IGN);

  if (flags.command != "run") {
    // The address: --redis, else FT_REDIS, else --redis-env FILE (or the default file).
    std::string env_file = flags.redis_env;
    if (env_file.empty() && flags.redis.empty() && config.redis_url.empty() &&
        FileExists(default_env_file)) {
      env_file = default_env_file;
    }
    if (!env_file.empty()) {
      std::string url, password, user;
      s = ft::master::ReadEnvFile(env_file, &url, &password, &user);
      if (!s.ok()) return Fail(s);
      if (flags.redis.empty()) config.redis_url = url;
      if (!password.empty()) config.redis_password = password;
      if (!user.empty()) config.redis_user = user;
    }
    ft::redis::Endpoint endpoint;
    s = ft::redis::EndpointFromConfig(config, flags.redis, &endpoint);
    if (!s.ok()) {
      std::fprintf(stderr, "ftmaster: %s (or pass --redis-env FILE)\n",
                   std::string(s.message()).c_str());
      return 2;
    }
    std::unique_ptr<ft::redis::Commands> connection;
    s = ft::redis::OpenCommands(endpoint, std::chrono::milliseconds(2000),
                                std::chrono::milliseconds(10000), &connection);
    if (!s.ok()) return Fail(s);
    ft::redis::Commands& client = *connection;
    ft::master::CliOptions options;
    options.job = job;
    options.json = flags.json;
    options.topology = flags.topology;
    options.order = flags.order;
    options.now_unix_ms = UnixMs();
    std::string out;
    if (flags.command == "status") {
      s = ft::master::StatusCommand(client, options, &out);
    } else if (flags.command == "incidents") {
      s = ft::master::IncidentsCommand(client, options, &out);
    } else if (flags.command == "timeouts") {
      s = ft::master::TimeoutsCommand(client, options, &out);
    } else if (flags.command == "goodput") {
      s = ft::master::GoodputCommand(client, options, &out);
    } else if (flags.command == "checkpoints") {
      s = ft::master::CheckpointsCommand(client, options, &out);
    } else if (flags.command == "save") {
      s = ft::master::SaveCommand(client, options, &out);
    } else if (flags.command == "nodes") {
      nodes.json = flags.json;
      nodes.now_unix_ms = options.now_unix_ms;
      s = ft::master::NodesCommand(client, nodes, &out);
    } else if (flags.command == "stacks") {
      int rank = -1;
      if (!ft::master::ParseRankFlag(flags.rank, &rank)) return Usage("stacks needs --rank R (a rank of the job)");
      s = ft::master::StacksCommand(client, options, rank, &out);
    } else {
      s = ft::master::EvictedCommand(client, options, &out);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return s.ok() ? 0 : Fail(s);
  }

  // run
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  ft::master::EmbeddedRedis embedded;
  ft::redis::Endpoint endpoint;
  std::string env_file;
  if (flags.redis.empty() && config.redis_url.empty()) {
    s = embedded.Start();
    if (!s.ok()) return Fail(s);
    env_file = flags.redis_env.empty() ? default_env_file : flags.redis_env;
    s = embedded.WriteEnvFile(env_file);
    if (!s.ok()) return Fail(s);
    endpoint = embedded.endpoint();
    FT_LOG(Info, Master, "started an embedded Redis at {}; workers find it with: set -a; . {}; "
           "set +a", ft::redis::Redacted(endpoint), env_file);
  } else {
    if (!flags.redis_env.empty()) {
      FT_LOG(Warn, Master, "--redis-env {} ignored: Redis is given (--redis or FT_REDIS), so no "
             "embedded Redis is started", flags.redis_env);
    }
    s = ft::redis::EndpointFromConfig(config, flags.redis, &endpoint);
    if (!s.ok()) {
      std::fprintf(stderr, "ftmaster: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }

  ft::master::MasterOptions options;
  options.job = job;
  options.id = flags.id;
  options.config = config;
  options.topology = flags.topology;
  options.order = flags.order;
  ft::master::MasterLoop loop(std::move(options), endpoint);
  s = loop.Init();
  if (!s.ok()) {
    std::fprintf(stderr, "ftmaster: %s (try --help)\n", std::string(s.message()).c_str());
    return 2;
  }
  // Metrics (README "Metrics"): read from Redis on their own thread, served on their own; the
  // live page (README "The live page") beside /metrics, read on a thread of its own too.
  ft::master::page::PageReader page({.job = job, .endpoint = endpoint});
  ft::metrics::Exporter exporter;
  (void)exporter.Start({.listen = config.metrics_listen, .default_port = ft::metrics::kMasterPort,
                        .textfile = config.metrics_textfile, .interval = config.metrics_interval,
                        .subsystem = ft::Subsystem::kMaster, .routes = page.Routes()});
  if (!exporter.address().empty()) {
    page.Start();
    FT_LOG(Info, Master, "page: serving http://{}/ (and /api/<panel>.json)", exporter.address());
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  ft::master::MasterMetrics master_metrics(
      {.job = job, .node = !config.node_id.empty() ? config.node_id : std::string(host),
       .master_id = loop.id(), .endpoint = endpoint, .interval = config.metrics_interval},
      &exporter.registry());
  master_metrics.Start();
  loop.Run(g_stop, flags.exit_when_stopped);
  master_metrics.Stop();
  exporter.Stop();
  page.Stop();
  if (!env_file.empty()) unlink(env_file.c_str());
  embedded.Stop();
  return 0;
}

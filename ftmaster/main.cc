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

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/config.h"
#include "common/environment.h"
#include "common/job_name.h"
#include "common/log.h"
#include "common/program_start.h"
#include "ftmaster/cli/acl.h"
#include "ftmaster/cli/cli.h"
#include "ftmaster/cli/goodput.h"
#include "ftmaster/cli/nodes.h"
#include "ftmaster/core/slow_policy.h"
#include "ftmaster/launch/embedded_redis.h"
#include "ftmaster/master_loop.h"
#include "ftmaster/master_metrics.h"
#include "ftmaster/page/reader.h"
#include "metrics/exporter.h"
#include "proto/keys.h"
#include "redis/client.h"
#include "redis/cluster.h"
#include "redis/url.h"

namespace {

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

// The flags that take a value (--name VALUE or --name=VALUE) and those that take none.
struct ValueFlag {
  const char* name;
  std::string Flags::*field;
};
constexpr ValueFlag kValueFlags[] = {
    {"--job", &Flags::job},           {"--redis", &Flags::redis},       {"--topology", &Flags::topology},
    {"--order", &Flags::order},       {"--id", &Flags::id},             {"--redis-env", &Flags::redis_env},
    {"--rank", &Flags::rank},         {"--cordon", &Flags::cordon},     {"--uncordon", &Flags::uncordon},
    {"--reason", &Flags::reason},     {"--for", &Flags::for_text},      {"--cordon-commands", &Flags::cordon_commands},
    {"--limit", &Flags::limit},
};
struct BoolFlag {
  const char* name;
  bool Flags::*field;
};
constexpr BoolFlag kBoolFlags[] = {
    {"--exit-when-stopped", &Flags::exit_when_stopped},
    {"--json", &Flags::json},
    {"--aclfile", &Flags::aclfile},
    {"--lemons", &Flags::lemons},
};
constexpr const char* kCommands[] = {"run",  "status", "incidents", "timeouts", "evicted", "checkpoints",
                                     "goodput", "save", "acl", "nodes", "stacks"};

int Usage(const std::string& message) {
  std::fprintf(stderr, "ftmaster: %s (try --help)\n", message.c_str());
  return 2;
}

// The flags that apply to the command given: 0, or a usage error (printed).
int CheckFlags(const Flags& flags) {
  if (flags.command.empty()) {
    return Usage("no command given: run, status, incidents, timeouts, evicted, checkpoints, goodput, save, "
                 "stacks or acl");
  }
  const bool run = flags.command == "run";
  if (run && flags.json) {
    return Usage("--json applies to status, incidents, timeouts, evicted, checkpoints, goodput, save and stacks");
  }
  if (!run && flags.exit_when_stopped) return Usage("--exit-when-stopped applies to run");
  if (!run && !flags.id.empty()) return Usage("--id applies to run");
  if (flags.aclfile && flags.command != "acl") return Usage("--aclfile applies to acl");
  if (flags.command == "acl" && flags.json) return Usage("--json does not apply to acl");
  if (flags.command != "nodes" && (flags.lemons || !flags.cordon.empty() || !flags.uncordon.empty() ||
                                   !flags.reason.empty() || !flags.for_text.empty() ||
                                   !flags.cordon_commands.empty() || !flags.limit.empty())) {
    return Usage("--lemons, --cordon, --uncordon, --reason, --for, --cordon-commands and --limit apply to nodes");
  }
  return 0;
}

// 0: parsed; 1: --help printed; 2: a usage error (printed).
int ParseFlags(int argc, char** argv, Flags* flags) {
  int i = 1;
  if (i < argc && argv[i][0] != '-') {
    flags->command = argv[i++];
    if (std::find(std::begin(kCommands), std::end(kCommands), flags->command) == std::end(kCommands)) {
      return Usage("unknown command '" + flags->command + "'");
    }
  }
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      inline_value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
    }
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 1;
    }
    auto is = [&](const auto& f) { return arg == f.name; };
    if (auto b = std::find_if(std::begin(kBoolFlags), std::end(kBoolFlags), is);
        b != std::end(kBoolFlags) && !inline_value) {
      flags->*(b->field) = true;
      continue;
    }
    auto v = std::find_if(std::begin(kValueFlags), std::end(kValueFlags), is);
    if (v == std::end(kValueFlags)) return Usage(std::string("unknown argument '") + argv[i] + "'");
    if (inline_value) {
      flags->*(v->field) = *inline_value;
    } else if (i + 1 < argc) {
      flags->*(v->field) = argv[++i];
    } else {
      return Usage(arg + " needs a value");
    }
  }
  return CheckFlags(*flags);
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

// What every command starts from: the settings (flags override FT_JOB and FT_REDIS) and the job.
struct Start {
  Flags flags;
  ft::Config config;
  std::string job;
  ft::master::NodesOptions nodes;  // nodes only
  // The job as every other file names it (common/job_name.h): two jobs never share the file.
  std::string DefaultEnvFile() const { return "ft-" + ft::JobToken(job) + ".redis.env"; }
};

// The settings, logging and the job: 0, or the exit code (the error printed).
int LoadStart(Start* st) {
  const Flags& flags = st->flags;
  ft::Status s = ft::LoadProgramConfig("ftmaster", ft::Subsystem::kMaster, ft::Environment::FromProcess(), &st->config);
  if (!s.ok()) {
    std::fprintf(stderr, "ftmaster: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (!ft::master::ParseSlowAction(st->config.slow_action)) {
    std::fprintf(stderr, "ftmaster: FT_SLOW_ACTION=%s: expected report or evict\n", st->config.slow_action.c_str());
    return 2;
  }
  if (std::string w = ft::redis::PasswordInArgumentWarning(flags.redis, "--redis"); !w.empty()) {
    FT_LOG(Warn, Master, "{}", w);
  }
  st->job = !flags.job.empty() ? flags.job : st->config.job;
  // nodes: across jobs (no job needed); its flags are checked before Redis is.
  if (flags.command == "nodes") {
    s = ft::master::NodesOptionsFromFlags(st->config, flags.lemons, flags.cordon, flags.uncordon, flags.reason,
                                          flags.for_text, flags.cordon_commands, flags.limit, &st->nodes);
    if (!s.ok()) return Usage(std::string(s.message()));
  }
  if (st->job.empty() && flags.command != "nodes") {
    std::fprintf(stderr, "ftmaster: --job is required (or set FT_JOB) (try --help)\n");
    return 2;
  }
  return 0;
}

// The operator's commands' connection: --redis, else FT_REDIS, else --redis-env FILE (or the
// default file). 0, or the exit code (the error printed).
int ConnectTool(Start* st, std::unique_ptr<ft::redis::Commands>* connection) {
  const Flags& flags = st->flags;
  std::string env_file = flags.redis_env;
  if (env_file.empty() && flags.redis.empty() && st->config.redis_url.empty() && FileExists(st->DefaultEnvFile())) {
    env_file = st->DefaultEnvFile();
  }
  if (!env_file.empty()) {
    std::string url, password, user;
    ft::Status s = ft::master::ReadEnvFile(env_file, &url, &password, &user);
    if (!s.ok()) return Fail(s);
    if (flags.redis.empty()) st->config.redis_url = url;
    if (!password.empty()) st->config.redis_password = password;
    if (!user.empty()) st->config.redis_user = user;
  }
  ft::redis::Endpoint endpoint;
  ft::Status s = ft::redis::EndpointFromConfig(st->config, flags.redis, &endpoint);
  if (!s.ok()) {
    std::fprintf(stderr, "ftmaster: %s (or pass --redis-env FILE)\n", std::string(s.message()).c_str());
    return 2;
  }
  s = ft::redis::OpenCommands(endpoint, std::chrono::milliseconds(2000), std::chrono::milliseconds(10000), connection);
  return s.ok() ? 0 : Fail(s);
}

// status, incidents, timeouts, evicted, checkpoints, goodput, save, stacks, nodes: one command
// over Redis, its output on stdout.
int RunTool(Start* st) {
  std::unique_ptr<ft::redis::Commands> connection;
  if (int rc = ConnectTool(st, &connection); rc != 0) return rc;
  ft::redis::Commands& client = *connection;
  const Flags& flags = st->flags;
  ft::master::CliOptions options;
  options.job = st->job;
  options.json = flags.json;
  options.topology = flags.topology;
  options.order = flags.order;
  options.now_unix_ms = UnixMs();
  using Command = ft::Status (*)(ft::redis::Commands&, const ft::master::CliOptions&, std::string*);
  const std::map<std::string, Command> commands = {
      {"status", ft::master::StatusCommand},           {"incidents", ft::master::IncidentsCommand},
      {"timeouts", ft::master::TimeoutsCommand},       {"goodput", ft::master::GoodputCommand},
      {"checkpoints", ft::master::CheckpointsCommand}, {"save", ft::master::SaveCommand},
      {"evicted", ft::master::EvictedCommand}};
  std::string out;
  ft::Status s;
  if (flags.command == "nodes") {
    st->nodes.json = flags.json;
    st->nodes.now_unix_ms = options.now_unix_ms;
    s = ft::master::NodesCommand(client, st->nodes, &out);
  } else if (flags.command == "stacks") {
    int rank = -1;
    if (!ft::master::ParseRankFlag(flags.rank, &rank)) return Usage("stacks needs --rank R (a rank of the job)");
    s = ft::master::StacksCommand(client, options, rank, &out);
  } else {
    s = commands.at(flags.command)(client, options, &out);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return s.ok() ? 0 : Fail(s);
}

// run's Redis: the one given (--redis or FT_REDIS), else an embedded one whose address and
// password go to *env_file for the workers. 0, or the exit code (the error printed).
int StartRedis(const Start& st, ft::master::EmbeddedRedis* embedded, ft::redis::Endpoint* endpoint,
               std::string* env_file) {
  const Flags& flags = st.flags;
  if (flags.redis.empty() && st.config.redis_url.empty()) {
    ft::Status s = embedded->Start();
    if (!s.ok()) return Fail(s);
    *env_file = flags.redis_env.empty() ? st.DefaultEnvFile() : flags.redis_env;
    s = embedded->WriteEnvFile(*env_file);
    if (!s.ok()) return Fail(s);
    *endpoint = embedded->endpoint();
    FT_LOG(Info, Master, "started an embedded Redis at {}; workers find it with: set -a; . {}; "
           "set +a", ft::redis::Redacted(*endpoint), *env_file);
    return 0;
  }
  if (!flags.redis_env.empty()) {
    FT_LOG(Warn, Master, "--redis-env {} ignored: Redis is given (--redis or FT_REDIS), so no "
           "embedded Redis is started", flags.redis_env);
  }
  ft::Status s = ft::redis::EndpointFromConfig(st.config, flags.redis, endpoint);
  if (!s.ok()) {
    std::fprintf(stderr, "ftmaster: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  return 0;
}

// run: the master loop until a signal (or, with --exit-when-stopped, the job's end), with its
// metrics and live page beside it.
int RunMaster(const Start& st) {
  const std::atomic<bool>& stop = ft::StopOnSignals();
  const Flags& flags = st.flags;
  const ft::Config& config = st.config;
  ft::master::EmbeddedRedis embedded;
  ft::redis::Endpoint endpoint;
  std::string env_file;
  if (int rc = StartRedis(st, &embedded, &endpoint, &env_file); rc != 0) return rc;

  ft::master::MasterOptions options;
  options.job = st.job;
  options.id = flags.id;
  options.config = config;
  options.topology = flags.topology;
  options.order = flags.order;
  ft::master::MasterLoop loop(std::move(options), endpoint);
  ft::Status s = loop.Init();
  if (!s.ok()) {
    std::fprintf(stderr, "ftmaster: %s (try --help)\n", std::string(s.message()).c_str());
    return 2;
  }
  // Metrics (README "Metrics"): read from Redis on their own thread, served on their own; the
  // live page (README "The live page") beside /metrics, read on a thread of its own too.
  ft::master::page::PageReader page({.job = st.job, .endpoint = endpoint});
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
      {.job = st.job, .node = !config.node_id.empty() ? config.node_id : std::string(host),
       .master_id = loop.id(), .endpoint = endpoint, .interval = config.metrics_interval},
      &exporter.registry());
  master_metrics.Start();
  loop.Run(stop, flags.exit_when_stopped);
  master_metrics.Stop();
  exporter.Stop();
  page.Stop();
  if (!env_file.empty()) unlink(env_file.c_str());
  embedded.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Start st;
  int parsed = ParseFlags(argc, argv, &st.flags);
  if (parsed == 1) return 0;
  if (parsed != 0) return 2;
  if (int rc = LoadStart(&st); rc != 0) return rc;
  if (st.flags.command == "acl") {
    std::string guide = ft::master::AclGuide(st.job, st.flags.aclfile);
    std::fputs(guide.c_str(), stderr);
    std::string text = ft::master::AclText(st.job, st.flags.aclfile);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);
  return st.flags.command == "run" ? RunMaster(st) : RunTool(&st);
}

// master_bench (make bench-master): how fast the real ftmaster decides a hang at 1k, 4k and 16k
// ranks, and what it costs in CPU while the job runs.
//
// Per size and trial: a private redis-server on loopback (password, free port); synthetic
// workers (this process) that write what ftworker writes, encoded by proto/codec.h — membership
// once, every rank's progress table every 200 ms, summaries and worker heartbeats every second;
// the real `ftmaster run` against it. After a steady period (the master's CPU is measured over
// it) one rank stops before collective s of its tp communicator; its tp peers wait in s, the
// rest of the job backs up behind them (dp allreduces and pipeline p2p), and the waiting ranks
// raise timeout events once their wait passes the published timeout. The trial ends when the
// incident is in ft:{J}:incidents; it must name the stopped rank.
//
// Figures per trial (Unix ms on one host: Redis stamps stream ids with the same clock):
//   close_to_written = the incident's stream id ms - its window_closed_unix_ms, the start of
//     the master tick that found the window closed, so this covers that tick's last
//     progress/membership read, WindowCanClose, Attribute, Decide and the incident write.
//     This is the RESULT decide_ms.
//   incident decide_ms = decided_unix_ms - first_event_unix_ms (the field ftmaster writes): the
//     collection window, up to FT_HANG_WINDOW, plus the master's tick latency.
//   first_to_written = stream id ms - first_event_unix_ms: what an operator waits after the
//     first timeout event.
// cpu_pct is the master's utime+stime (/proc/<pid>/stat) over the steady period, as % of one
// core; decision_cpu over first event → incident written is printed alongside.
//
// Pinning: with two CPUs or more, ftmaster runs alone on the last CPU; this driver and
// redis-server share the others, so "on one core" is what is measured. Real workers run on
// other hosts; here they share the machine, which makes the figures pessimistic.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "ftmaster/attribution.h"
#include "ftmaster/decision.h"
#include "ftmaster/store.h"
#include "ftmaster/straggler.h"
#include "ftmaster/timeouts.h"
#include "ftmaster/topology.h"
#include "proto/codec.h"
#include "proto/keys.h"
#include "proto/messages.h"
#include "redis/client.h"
#include "redis/tests/redis_server.h"

extern char** environ;

namespace ft::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

constexpr int kTp = 8;                 // ranks per tp group = ranks per node (one worker each)
constexpr int kStepMs = 100;           // the synthetic job's step
constexpr int kTpOpsPerStep = 4;       // tp allreduces per step; dp: 1; pp: 2 p2p ops
constexpr int64_t kProgressPeriodMs = 200;  // FT_REPORT_INTERVAL's default
constexpr int64_t kSummaryPeriodMs = 1000;  // FT_SUMMARY_INTERVAL's default
constexpr int64_t kDriverTickMs = 10;       // FT_WORKER_TICK's default
constexpr const char* kEventsCap = "100000";  // as ftworker's reporter

int64_t UnixMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "master_bench: %s\n", message.c_str());
  std::fflush(stderr);
  std::exit(1);
}

void Check(const Status& s, std::string_view doing) {
  if (!s.ok()) Die(fmt::format("{}: {}", doing, s.ToString()));
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A small deterministic hash for per-rank jitter: the same job every run.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double Jitter(uint64_t key, double spread) {  // in [-spread, +spread]
  return (static_cast<double>(Mix(key) % 10001) / 10000.0 * 2 - 1) * spread;
}

// ---- options --------------------------------------------------------------------------------

struct Options {
  std::string ftmaster;
  std::string redis_server = "redis-server";
  std::vector<int> ranks = {1024, 4096, 16384};
  int trials = 5;
  double steady_s = 3;
  std::string hang_window = "1s";
  bool all_events = false;  // every waiting rank raises its timeout, not only the tp peers
  bool profile = true;
  bool pin = true;
  std::string log_level = "info";
  std::string keep_logs;
};

constexpr const char* kUsage =
    "usage: master_bench [--ftmaster PATH] [--redis-server PATH] [--ranks 1024,4096,16384]\n"
    "                    [--trials 5] [--steady-s 3] [--hang-window 1s] [--events peers|all]\n"
    "                    [--no-profile] [--no-pin] [--log-level info] [--keep-logs DIR]\n"
    "Drives the real ftmaster with synthetic workers through a private redis-server and prints\n"
    "RESULT master ranks=<N> decide_ms=<median> cpu_pct=<median> per size (bench/README.md).\n"
    "  --ftmaster PATH     default: ../ftmaster/ftmaster next to this program\n"
    "  --events peers|all  which waiting ranks raise timeout events: the stopped rank's tp\n"
    "                      peers (default), or every rank that waits on it\n"
    "  --no-profile        skip the in-process timing of the decision's steps\n"
    "  --no-pin            do not put ftmaster alone on the last CPU\n"
    "  --keep-logs DIR     keep each trial's ftmaster log there\n";

std::string DefaultFtmaster() {
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "ftmaster";
  std::string dir(self, static_cast<size_t>(n));
  dir = dir.substr(0, dir.rfind('/'));            // <build>/bench
  return dir.substr(0, dir.rfind('/')) + "/ftmaster/ftmaster";
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  o.ftmaster = DefaultFtmaster();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(arg + " needs a value (try --help)");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--ftmaster") {
      o.ftmaster = value();
    } else if (arg == "--redis-server") {
      o.redis_server = value();
    } else if (arg == "--ranks") {
      o.ranks.clear();
      std::stringstream ss(value());
      std::string part;
      while (std::getline(ss, part, ',')) {
        const int n = std::atoi(part.c_str());
        if (n < 2 * kTp || n % kTp != 0) {
          Die(fmt::format("--ranks: '{}' must be a multiple of {} and at least {}", part, kTp,
                          2 * kTp));
        }
        o.ranks.push_back(n);
      }
    } else if (arg == "--trials") {
      o.trials = std::max(1, std::atoi(value().c_str()));
    } else if (arg == "--steady-s") {
      o.steady_s = std::max(0.5, std::atof(value().c_str()));
    } else if (arg == "--hang-window") {
      o.hang_window = value();
    } else if (arg == "--events") {
      const std::string v = value();
      if (v != "peers" && v != "all") Die("--events takes peers or all");
      o.all_events = v == "all";
    } else if (arg == "--no-profile") {
      o.profile = false;
    } else if (arg == "--no-pin") {
      o.pin = false;
    } else if (arg == "--log-level") {
      o.log_level = value();
    } else if (arg == "--keep-logs") {
      o.keep_logs = value();
    } else {
      Die("unknown argument '" + arg + "' (try --help)");
    }
  }
  return o;
}

// A program name as execvp would find it, or "" when it would not.
std::string FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  char buf[8192] = {};
  std::string path = confstr(_CS_PATH, buf, sizeof(buf)) > 0 ? buf : "/usr/bin:/bin";
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  }
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string full = (dir.empty() ? "." : dir) + "/" + name;
    if (access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

// ---- the synthetic job ----------------------------------------------------------------------

// tp x dp x pp in Megatron order tp-dp-pp (tp varies fastest), tp = 8 = one node. pp grows with
// the job (4, 8, 16 for 1k, 4k, 16k), dp takes the rest; one communicator per tp, dp and pp
// group, the pp ones point-to-point.
struct Layout {
  int tp = kTp, dp = 1, pp = 1;

  // pp: the largest power of two up to sqrt(n) / 8 (4, 8, 16 for 1k, 4k, 16k: large jobs
  // deepen their pipelines as well as widen dp), leaving at least two dp replicas.
  static Layout ForRanks(int n) {
    Layout l;
    const int groups = n / kTp;
    int pp = 1;
    while (pp * 2 * kTp <= static_cast<int>(std::sqrt(static_cast<double>(n))) &&
           groups % (pp * 2) == 0 && groups / (pp * 2) >= 2) {
      pp *= 2;
    }
    l.pp = pp;
    l.dp = groups / pp;
    return l;
  }
  int world() const { return tp * dp * pp; }
  int Rank(int t, int d, int s) const { return t + tp * (d + dp * s); }
  int T(int r) const { return r % tp; }
  int D(int r) const { return (r / tp) % dp; }
  int S(int r) const { return r / (tp * dp); }
  // Communicator ids: a kind in the top 12 bits, the group's index below.
  static constexpr uint64_t kTpKind = 0x547, kDpKind = 0x548, kPpKind = 0x549;
  uint64_t TpComm(int d, int s) const { return Comm(kTpKind, d + dp * s); }
  uint64_t DpComm(int t, int s) const { return Comm(kDpKind, t + tp * s); }
  uint64_t PpComm(int t, int d) const { return Comm(kPpKind, t + tp * d); }
  static uint64_t Comm(uint64_t kind, int index) {
    return (kind << 52) + static_cast<uint64_t>(index);
  }
  static bool IsTp(const proto::CommRow& row) { return row.comm_id >> 52 == kTpKind; }
  static bool IsDp(const proto::CommRow& row) { return row.comm_id >> 52 == kDpKind; }
  std::string Node(int r) const { return fmt::format("n{:05d}", r / kTp); }
  int nodes() const { return world() / kTp; }
  std::string Describe() const { return fmt::format("dp={},tp={},pp={}", dp, tp, pp); }
};

// What a rank is doing once the hang is in.
enum class Role {
  kStopped,   // the injected rank: never enters tp collective s (a host-side hang)
  kTpPeer,    // its tp group: in collective s, waiting on it
  kChain,     // its pipeline (same dp replica, other stages): p2p toward the stopped stage
  kDpWaiter,  // every other replica: finished the step, waiting in the dp allreduce
};

// Encodes once with sentinel numbers where fields change; Render writes the value again with
// other numbers by concatenation. Re-encoding 16k progress tables through nlohmann every
// 200 ms would take most of a core, and this machine must leave one to ftmaster.
class Template {
 public:
  struct Hole {
    std::string sentinel;
    bool integer = true;
  };

  static Status Make(const std::string& text, const std::vector<Hole>& holes, Template* out) {
    std::vector<std::pair<size_t, int>> at;
    for (size_t i = 0; i < holes.size(); ++i) {
      const std::string& s = holes[i].sentinel;
      const size_t p = FindNumber(text, s, 0);
      if (p == std::string::npos || FindNumber(text, s, p + 1) != std::string::npos) {
        return Status::Internal(fmt::format("sentinel {} is not in the encoded value exactly "
                                            "once: {}", s, text.substr(0, 200)));
      }
      at.emplace_back(p, static_cast<int>(i));
    }
    std::sort(at.begin(), at.end());
    Template t;
    size_t from = 0;
    for (const auto& [p, i] : at) {
      if (p < from) return Status::Internal("overlapping sentinels");
      t.pieces_.push_back(text.substr(from, p - from));
      t.order_.push_back(i);
      t.integer_.push_back(holes[static_cast<size_t>(i)].integer);
      from = p + holes[static_cast<size_t>(i)].sentinel.size();
    }
    t.pieces_.push_back(text.substr(from));
    t.size_ = text.size();
    *out = std::move(t);
    return Status::Ok();
  }

  // `number` where it is a whole JSON number, not digits inside a longer one
  // (29.471880000000002 holds 880000000002).
  static size_t FindNumber(const std::string& text, const std::string& number, size_t from) {
    auto part_of_number = [](char c) {
      return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
    };
    for (size_t p = text.find(number, from); p != std::string::npos;
         p = text.find(number, p + 1)) {
      const size_t end = p + number.size();
      if ((p == 0 || !part_of_number(text[p - 1])) &&
          (end == text.size() || !part_of_number(text[end]))) {
        return p;
      }
    }
    return std::string::npos;
  }

  void Render(std::span<const double> values, std::string* out) const {
    out->clear();
    out->reserve(size_ + 16);
    for (size_t i = 0; i < order_.size(); ++i) {
      out->append(pieces_[i]);
      const double v = values[static_cast<size_t>(order_[i])];
      if (integer_[i]) {
        fmt::format_to(std::back_inserter(*out), "{}", static_cast<int64_t>(v));
      } else {
        fmt::format_to(std::back_inserter(*out), "{:.1f}", v);
      }
    }
    out->append(pieces_.back());
  }

 private:
  std::vector<std::string> pieces_;
  std::vector<int> order_;
  std::vector<bool> integer_;
  size_t size_ = 0;
};

// Sentinels: 12-digit integers and 6-digit whole doubles (nlohmann writes "900001.0"), found
// only as whole numbers; Make checks that each occurs exactly once.
double IntSentinel(int i) { return 880000000000.0 + i; }
double NumSentinel(int i) { return 900000.0 + i; }
std::vector<Template::Hole> Holes(int ints, int nums) {
  std::vector<Template::Hole> h;
  for (int i = 0; i < ints; ++i) {
    h.push_back({fmt::format("{}", static_cast<int64_t>(IntSentinel(i))), true});
  }
  for (int i = 0; i < nums; ++i) h.push_back({fmt::format("{:.1f}", NumSentinel(i)), false});
  return h;
}

// The changing numbers of a progress table, in the order of its template's holes: integers
// first (observed_unix_ms, then per row entered, started, completed), then numbers
// (last_call_age_ms, blocked_ms, then per row entered/started/completed ages).
struct ProgressDyn {
  int64_t observed = 0;
  double last_call_age = 0, blocked = 0;
  struct Row {
    uint64_t e = 0, s = 0, c = 0;
    double ea = 0, sa = 0, ca = 0;
  };
  std::vector<Row> rows;

  void Values(std::vector<double>* v) const {
    v->clear();
    v->push_back(static_cast<double>(observed));
    for (const Row& r : rows) {
      v->push_back(static_cast<double>(r.e));
      v->push_back(static_cast<double>(r.s));
      v->push_back(static_cast<double>(r.c));
    }
    v->push_back(last_call_age);
    v->push_back(blocked);
    for (const Row& r : rows) {
      v->push_back(r.ea);
      v->push_back(r.sa);
      v->push_back(r.ca);
    }
  }
  static ProgressDyn Sentinels(size_t rows) {
    ProgressDyn d;
    int i = 0, n = 0;
    d.observed = static_cast<int64_t>(IntSentinel(i++));
    d.rows.resize(rows);
    for (Row& r : d.rows) {
      r.e = static_cast<uint64_t>(IntSentinel(i++));
      r.s = static_cast<uint64_t>(IntSentinel(i++));
      r.c = static_cast<uint64_t>(IntSentinel(i++));
    }
    d.last_call_age = NumSentinel(n++);
    d.blocked = NumSentinel(n++);
    for (Row& r : d.rows) {
      r.ea = NumSentinel(n++);
      r.sa = NumSentinel(n++);
      r.ca = NumSentinel(n++);
    }
    return d;
  }
};

struct SummaryDyn {
  int64_t unix_ms = 0;
  uint64_t steps = 0, records = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ops;  // count, last_seq

  void Values(std::vector<double>* v) const {
    v->clear();
    v->push_back(static_cast<double>(unix_ms));
    v->push_back(static_cast<double>(steps));
    v->push_back(static_cast<double>(records));
    for (const auto& [count, seq] : ops) {
      v->push_back(static_cast<double>(count));
      v->push_back(static_cast<double>(seq));
    }
  }
};

struct Hang {
  int stopped = -1;      // the rank
  int xt = 0, xd = 0, xp = 0;
  int64_t t0 = 0;        // Unix ms: the stopped rank's last call
  uint64_t k0 = 0;       // steps completed before it
  double timeout_ms = 1000;
};

class SyntheticJob {
 public:
  SyntheticJob(Layout layout, std::string job, Hang hang, int64_t start_ms)
      : layout_(layout), keys_(job), hang_(hang), start_ms_(start_ms) {}

  // Encodes every rank's membership and the templates of its progress (running and hung)
  // and summary.
  Status Build() {
    const int n = layout_.world();
    roles_.resize(static_cast<size_t>(n));
    membership_.resize(static_cast<size_t>(n));
    running_.resize(static_cast<size_t>(n));
    hung_.resize(static_cast<size_t>(n));
    summary_.resize(static_cast<size_t>(n));
    summary_ops_.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      roles_[static_cast<size_t>(r)] = RoleOf(r);
      proto::Membership m;
      m.rank = r;
      m.local_rank = r % kTp;
      m.world_size = n;
      m.node = layout_.Node(r);
      m.host = m.node;
      m.pid = Pid(r);
      m.incarnation = Incarnation();
      m.state = "running";
      m.unix_ms = start_ms_;
      for (const proto::CommRow& row : Rows(r, false)) {
        m.comms.push_back({row.comm_id, row.p2p, row.comm_rank, row.comm_size});
      }
      membership_[static_cast<size_t>(r)] = proto::Encode(m);
      const size_t rows = m.comms.size();
      const ProgressDyn sentinels = ProgressDyn::Sentinels(rows);
      const auto holes = Holes(1 + 3 * static_cast<int>(rows), 2 + 3 * static_cast<int>(rows));
      FT_RETURN_IF_ERROR(Template::Make(proto::Encode(Progress(r, false, sentinels)), holes,
                                        &running_[static_cast<size_t>(r)]));
      FT_RETURN_IF_ERROR(Template::Make(proto::Encode(Progress(r, true, sentinels)), holes,
                                        &hung_[static_cast<size_t>(r)]));
      FT_RETURN_IF_ERROR(BuildSummary(r));
    }
    // Every kind of rendered value must read back (a sentinel mistake would otherwise only
    // show as values the master skips).
    for (int r : {0, hang_.stopped, n - 1}) {
      for (bool hung : {false, true}) {
        std::string text;
        RenderProgress(r, hung, start_ms_ + 5000, &text);
        proto::RankProgress p;
        FT_RETURN_IF_ERROR(proto::Decode(text, &p).WithContext(fmt::format("rank {} progress", r)));
      }
      std::string text;
      RenderSummary(r, start_ms_ + 5000, false, &text);
      proto::RankSummary s;
      FT_RETURN_IF_ERROR(proto::Decode(text, &s).WithContext(fmt::format("rank {} summary", r)));
    }
    return Status::Ok();
  }

  const proto::Keys& keys() const { return keys_; }
  const Hang& hang() const { return hang_; }
  void SetHangStart(int64_t t0) {
    hang_.t0 = t0;
    hang_.k0 = static_cast<uint64_t>((t0 - start_ms_) / kStepMs);
  }
  void SetTimeout(double ms) { hang_.timeout_ms = ms; }
  Role role(int r) const { return roles_[static_cast<size_t>(r)]; }

  // One HSET per node (its worker's ranks) for membership, progress, summaries.
  void MembershipCommands(std::vector<redis::Argv>* out) const {
    for (int node = 0; node < layout_.nodes(); ++node) {
      redis::Argv argv = {"HSET", keys_.Ranks()};
      for (int r = node * kTp; r < (node + 1) * kTp; ++r) {
        argv.push_back(std::to_string(r));
        argv.push_back(membership_[static_cast<size_t>(r)]);
      }
      out->push_back(std::move(argv));
    }
  }

  void ProgressCommand(int node, int64_t now, bool hung, std::vector<redis::Argv>* out) {
    redis::Argv argv = {"HSET", keys_.Progress()};
    argv.reserve(2 + 2 * kTp);
    for (int r = node * kTp; r < (node + 1) * kTp; ++r) {
      argv.push_back(std::to_string(r));
      argv.emplace_back();
      RenderProgress(r, hung, now, &argv.back());
    }
    out->push_back(std::move(argv));
  }

  void SummaryCommand(int node, int64_t now, bool hung, std::vector<redis::Argv>* out) {
    redis::Argv argv = {"HSET", keys_.Summaries()};
    argv.reserve(2 + 2 * kTp);
    for (int r = node * kTp; r < (node + 1) * kTp; ++r) {
      argv.push_back(std::to_string(r));
      argv.emplace_back();
      RenderSummary(r, now, hung, &argv.back());
    }
    out->push_back(std::move(argv));
  }

  // As ftworker's reporter: the heartbeat key with a 5 s TTL and the workers set.
  void HeartbeatCommands(int node, int64_t now, std::vector<redis::Argv>* out) const {
    proto::WorkerHeartbeat beat;
    beat.node = layout_.Node(node * kTp);
    beat.host = beat.node;
    beat.pid = 300000 + node;
    for (int r = node * kTp; r < (node + 1) * kTp; ++r) beat.ranks.push_back(r);
    beat.unix_ms = now;
    out->push_back({"SET", keys_.WorkerHeartbeat(beat.node), proto::Encode(beat), "EX", "5"});
    out->push_back({"SADD", keys_.Workers(), beat.node});
  }

  int nodes() const { return layout_.nodes(); }

  // When a waiting rank's wait began: its tp peers at t0; the pipeline backs up stage by
  // stage; other replicas reach their dp allreduce within about a step.
  int64_t WaitStart(int r) const {
    switch (role(r)) {
      case Role::kStopped:
      case Role::kTpPeer: return hang_.t0;
      case Role::kChain: return hang_.t0 + 5 * std::abs(layout_.S(r) - hang_.xp);
      case Role::kDpWaiter: return hang_.t0 + 20 + static_cast<int64_t>(Mix(r) % 80);
    }
    return hang_.t0;
  }

  // The timeout event rank r's worker raises once its wait passes the timeout, with the
  // rank's progress at that moment, as ftworker writes it (XADD with kind, rank, node, json).
  struct PendingEvent {
    int64_t due = 0;
    int rank = -1;
    redis::Argv xadd;
    redis::Argv hset;  // the reporter also writes the event's table as the rank's progress
  };
  std::vector<PendingEvent> Events(bool all) {
    std::vector<PendingEvent> out;
    for (int r = 0; r < layout_.world(); ++r) {
      const Role ro = role(r);
      if (ro == Role::kStopped || (!all && ro != Role::kTpPeer)) continue;
      // A worker notices within its tick; nodes differ in phase.
      const int64_t due = WaitStart(r) + static_cast<int64_t>(hang_.timeout_ms) + 1 +
                          static_cast<int64_t>(Mix(0x5eed + r / kTp) % kDriverTickMs);
      proto::Event e;
      e.kind = "timeout";
      e.rank = r;
      e.node = layout_.Node(r);
      e.unix_ms = due;
      e.started = true;
      e.timeout_ms = hang_.timeout_ms;
      e.age_ms = static_cast<double>(due - WaitStart(r));
      e.progress = Progress(r, true, HungDyn(r, due));
      for (const proto::CommRow& row : e.progress.comms) {
        if (row.started_seq > row.completed_seq) {
          e.comm_id = row.comm_id;
          e.op = row.op;
          e.seq = row.completed_seq + 1;
        }
      }
      e.message = fmt::format("rank {} waits in {} #{} on comm {} for {:.0f} ms (timeout {:.0f} "
                              "ms): a peer has not joined; see ftmaster's incident",
                              r, e.op, e.seq, proto::CommIdHex(e.comm_id), e.age_ms,
                              e.timeout_ms);
      PendingEvent p;
      p.due = due;
      p.rank = r;
      p.xadd = {"XADD", keys_.Events(), "MAXLEN", "~", kEventsCap, "*", "kind", "timeout",
                "rank", std::to_string(r), "node", e.node, "json", proto::Encode(e)};
      p.hset = {"HSET", keys_.Progress(), std::to_string(r), proto::Encode(e.progress)};
      out.push_back(std::move(p));
    }
    std::sort(out.begin(), out.end(),
              [](const PendingEvent& a, const PendingEvent& b) { return a.due < b.due; });
    return out;
  }

 private:
  Role RoleOf(int r) const {
    if (r == hang_.stopped) return Role::kStopped;
    const int d = layout_.D(r), s = layout_.S(r);
    if (d == hang_.xd && s == hang_.xp) return Role::kTpPeer;
    if (d == hang_.xd) return Role::kChain;
    return Role::kDpWaiter;
  }
  static int Pid(int r) { return 100000 + r; }
  uint64_t Incarnation() const { return static_cast<uint64_t>(start_ms_ - 60000) * 1000000; }

  // The rows of rank r, with op/peer for its state; sequence numbers and ages are left 0.
  std::vector<proto::CommRow> Rows(int r, bool hung) const {
    const int t = layout_.T(r), d = layout_.D(r), s = layout_.S(r);
    std::vector<proto::CommRow> rows;
    auto add = [&](uint64_t comm, bool p2p, int comm_rank, int size, const char* op,
                   uint64_t bytes, int64_t peer) {
      proto::CommRow row;
      row.comm_id = comm;
      row.p2p = p2p;
      row.comm_rank = comm_rank;
      row.comm_size = size;
      row.op = op;
      row.bytes = bytes;
      row.peer = peer;
      rows.push_back(row);
    };
    if (layout_.tp > 1) add(layout_.TpComm(d, s), false, t, layout_.tp, "allreduce", 4 << 20, -1);
    if (layout_.dp > 1) add(layout_.DpComm(t, s), false, d, layout_.dp, "allreduce", 64 << 20, -1);
    if (layout_.pp > 1) {
      // Running: the last p2p op of the step; hung, a chain rank's pending one points toward
      // the stopped stage.
      const bool toward_next = hung && role(r) == Role::kChain ? s < hang_.xp : s + 1 < layout_.pp;
      add(layout_.PpComm(t, d), true, s, layout_.pp, toward_next ? "send" : "recv", 8 << 20,
          toward_next ? s + 1 : s - 1);
    }
    return rows;
  }

  proto::RankProgress Progress(int r, bool hung, const ProgressDyn& dyn) const {
    proto::RankProgress p;
    p.rank = r;
    p.node = layout_.Node(r);
    p.pid = Pid(r);
    p.incarnation = Incarnation();
    p.state = "running";
    p.observed_unix_ms = dyn.observed;
    p.last_call_age_ms = dyn.last_call_age;
    p.blocked_ms = dyn.blocked;
    // Running ranks launch work all the time (busy); hung, the stopped rank idles on the host
    // and the waiting ones spin inside a synchronizing call (blocked, so not busy).
    p.cpu_pct = !hung ? 95 : role(r) == Role::kStopped ? 2 : 100;
    p.busy = !hung;
    p.comms = Rows(r, hung);
    for (size_t i = 0; i < p.comms.size() && i < dyn.rows.size(); ++i) {
      proto::CommRow& row = p.comms[i];
      row.entered_seq = dyn.rows[i].e;
      row.started_seq = dyn.rows[i].s;
      row.completed_seq = dyn.rows[i].c;
      row.entered_age_ms = dyn.rows[i].ea;
      row.started_age_ms = dyn.rows[i].sa;
      row.completed_age_ms = dyn.rows[i].ca;
    }
    return p;
  }

  // Per row kind, the sequence numbers after k steps.
  static uint64_t PerStep(const proto::CommRow& row) {
    return row.p2p ? 2 : Layout::IsTp(row) ? kTpOpsPerStep : 1;
  }

  ProgressDyn RunningDyn(int r, int64_t now) const {
    ProgressDyn d;
    const int64_t since = std::max<int64_t>(now - start_ms_, 0);
    const uint64_t k = static_cast<uint64_t>(since / kStepMs);
    const double phase = static_cast<double>(since % kStepMs);
    d.observed = now;
    d.last_call_age = 0.2;
    d.blocked = 0;
    for (const proto::CommRow& row : Rows(r, false)) {
      const uint64_t seq = k * PerStep(row);
      d.rows.push_back({seq, seq, seq, phase + 3, phase + 2, phase});
    }
    return d;
  }

  ProgressDyn HungDyn(int r, int64_t now) const {
    ProgressDyn d;
    const Role ro = role(r);
    const uint64_t k0 = hang_.k0;
    const double h = static_cast<double>(std::max<int64_t>(now - hang_.t0, 0));
    const double w = static_cast<double>(std::max<int64_t>(now - WaitStart(r), 0));
    d.observed = now;
    d.last_call_age = ro == Role::kStopped ? h : w;
    d.blocked = ro == Role::kStopped ? 0 : w;
    for (const proto::CommRow& row : Rows(r, true)) {
      const bool tp = Layout::IsTp(row);
      const bool dp = Layout::IsDp(row);
      uint64_t done = k0 * PerStep(row);
      bool waiting = false;
      if (ro == Role::kTpPeer && tp) waiting = true;
      if (ro == Role::kChain && row.p2p) waiting = true;
      if (ro == Role::kDpWaiter) {
        // Finished step k0 + 1 except its dp allreduce, in which it waits.
        if (dp) {
          waiting = true;
        } else {
          done = (k0 + 1) * PerStep(row);
        }
      }
      if (waiting) {
        d.rows.push_back({done + 1, done + 1, done, w, w, w + 10});
      } else {
        d.rows.push_back({done, done, done, w + 20, w + 19, w + 15});
      }
    }
    return d;
  }

  void RenderProgress(int r, bool hung, int64_t now, std::string* out) {
    const ProgressDyn dyn = hung ? HungDyn(r, now) : RunningDyn(r, now);
    dyn.Values(&scratch_);
    (hung ? hung_ : running_)[static_cast<size_t>(r)].Render(scratch_, out);
  }

  Status BuildSummary(int r) {
    proto::RankSummary s;
    s.rank = r;
    s.node = layout_.Node(r);
    // Healthy jitter (±3%): far from the straggler detector's 20%.
    s.step_ms = kStepMs * (1 + Jitter(r * 7 + 1, 0.03));
    s.step_p50_ms = kStepMs * (1 + Jitter(r * 7 + 2, 0.03));
    s.compute_ms = 70 * (1 + Jitter(r * 7 + 3, 0.03));
    s.comm_wait_ms = 30 * (1 + Jitter(r * 7 + 4, 0.03));
    s.dropped = 0;
    int ints = 0;
    s.unix_ms = static_cast<int64_t>(IntSentinel(ints++));
    s.steps = static_cast<uint64_t>(IntSentinel(ints++));
    s.records = static_cast<uint64_t>(IntSentinel(ints++));
    for (const proto::CommRow& row : Rows(r, false)) {
      std::vector<const char*> ops = {row.p2p ? "send" : "allreduce"};
      if (row.p2p) ops.push_back("recv");
      for (const char* op : ops) {
        proto::OpSummary o;
        o.comm_id = row.comm_id;
        o.op = op;
        o.bucket = proto::SizeBucket(row.bytes);
        const double base = row.p2p ? 1.5 : Layout::IsTp(row) ? 2.0 : 20.0;
        o.p50_ms = base * (1 + Jitter(r * 31 + ints, 0.03));
        o.p99_ms = o.p50_ms * 1.4;
        o.max_ms = o.p50_ms * 1.8;
        o.count = static_cast<uint64_t>(IntSentinel(ints++));
        o.last_seq = static_cast<uint64_t>(IntSentinel(ints++));
        s.ops.push_back(o);
        summary_ops_[static_cast<size_t>(r)].push_back(PerStep(row) / (row.p2p ? 2 : 1));
      }
    }
    return Template::Make(proto::Encode(s), Holes(ints, 0), &summary_[static_cast<size_t>(r)]);
  }

  void RenderSummary(int r, int64_t now, bool hung, std::string* out) {
    const int64_t until = hung ? hang_.t0 : now;
    const uint64_t k = static_cast<uint64_t>(std::max<int64_t>(until - start_ms_, 0) / kStepMs);
    SummaryDyn dyn;
    dyn.unix_ms = now;
    dyn.steps = k;
    uint64_t per_window = 0;
    for (uint64_t per_step : summary_ops_[static_cast<size_t>(r)]) {
      // In a hang nothing completes: the window's counts drop to 0.
      const uint64_t count = hung ? 0 : per_step * (kSummaryPeriodMs / kStepMs);
      dyn.ops.emplace_back(count, k * per_step);
      per_window += count;
    }
    dyn.records = per_window * 3;
    dyn.Values(&scratch_);
    summary_[static_cast<size_t>(r)].Render(scratch_, out);
  }

  Layout layout_;
  proto::Keys keys_;
  Hang hang_;
  int64_t start_ms_;
  std::vector<Role> roles_;
  std::vector<std::string> membership_;
  std::vector<Template> running_, hung_, summary_;
  std::vector<std::vector<uint64_t>> summary_ops_;  // per op of the summary: ops per step
  std::vector<double> scratch_;
};

// ---- processes ------------------------------------------------------------------------------

int CpuCount() { return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))); }

// The master alone on the last CPU; the driver and redis-server (its child) on the others.
void PinDriver(bool pin) {
  const int cpus = CpuCount();
  if (!pin || cpus < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = 0; c + 1 < cpus; ++c) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    std::fprintf(stderr, "master_bench: sched_setaffinity failed (%s); running unpinned\n",
                 std::strerror(errno));
  }
}

// utime + stime of a process, in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return NAN;
  std::stringstream ss(text.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && ss >> field; ++i) {
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The CPU other programs used during a trial, in % of one core: on a shared 2-CPU machine the
// noise under the figures. Machine-wide busy time (/proc/stat, which also counts processes
// that came and went in between) minus this process and its children (ftmaster,
// redis-server; live ones from /proc, reaped ones from rusage) and minus kernel threads
// (ksoftirqd and kworkers carry the loopback traffic of the bench itself).
class OtherLoad {
 public:
  OtherLoad() : start_(Clock::now()), total_(MachineBusy()), ours_(Ours(&kthreads_)) {}

  double Pct() const {
    std::vector<std::pair<pid_t, double>> kthreads;
    const double ours = Ours(&kthreads);
    double kernel = 0;
    for (const auto& [pid, cpu] : kthreads) {
      double before = 0;
      for (const auto& [p, c] : kthreads_) {
        if (p == pid) before = c;
      }
      kernel += cpu - before;
    }
    const double other = (MachineBusy() - total_) - (ours - ours_) - kernel;
    // The counters tick at different granularities: ±10% of a core is noise, not load.
    return std::max(0.0, other / (MsSince(start_) / 1000) * 100);
  }

 private:
  static double MachineBusy() {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    double total = 0, v = 0;
    stat >> cpu;
    for (int i = 0; i < 8 && stat >> v; ++i) {
      if (i != 3 && i != 4) total += v;  // all but idle and iowait
    }
    return total / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  // This process and its children; kernel threads' own figures into *kthreads.
  static double Ours(std::vector<std::pair<pid_t, double>>* kthreads) {
    kthreads->clear();
    const pid_t self = getpid();
    // Children already reaped (the trial's ftmaster once stopped) count through rusage.
    rusage reaped = {};
    getrusage(RUSAGE_CHILDREN, &reaped);
    double ours = CpuSeconds(self) + static_cast<double>(reaped.ru_utime.tv_sec) +
                  static_cast<double>(reaped.ru_stime.tv_sec) +
                  static_cast<double>(reaped.ru_utime.tv_usec + reaped.ru_stime.tv_usec) / 1e6;
    DIR* proc = opendir("/proc");
    if (proc == nullptr) return ours;
    while (dirent* e = readdir(proc)) {
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid <= 0 || pid == self) continue;
      std::ifstream in(fmt::format("/proc/{}/stat", pid));
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const size_t close = text.rfind(')');
      if (close == std::string::npos) continue;
      std::stringstream ss(text.substr(close + 2));
      std::string state;
      pid_t ppid = 0;
      ss >> state >> ppid;
      if (ppid == self) ours += CpuSeconds(pid);
      if (ppid == 2 || pid == 2) kthreads->emplace_back(pid, CpuSeconds(pid));
    }
    closedir(proc);
    return ours;
  }

  Clock::time_point start_;
  double total_;
  std::vector<std::pair<pid_t, double>> kthreads_;
  double ours_;
};

class Master {
 public:
  ~Master() { Stop(); }

  Status Start(const Options& o, const std::string& job, const std::string& url,
               const std::string& password, const Layout& layout, const std::string& log_path) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      // The caller's FT_* settings would change what is measured; the bench sets its own.
      if (std::strncmp(*e, "FT_", 3) != 0) env.emplace_back(*e);
    }
    env.push_back("FT_REDIS_PASSWORD=" + password);
    env.push_back("FT_HANG_WINDOW=" + o.hang_window);
    env.push_back("FT_LOG_LEVEL=" + o.log_level);
    std::vector<std::string> args = {o.ftmaster, "run", "--job", job, "--redis", url,
                                     "--topology", layout.Describe(), "--order", "tp-dp-pp",
                                     "--id", "master-bench"};
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno(errno, "creating " + log_path);
    const int cpus = CpuCount();
    const bool pin = o.pin && cpus >= 2;
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      close(fd);
      return Status::FromErrno(errno, "fork for ftmaster");
    }
    if (pid_ == 0) {
      // A bench that dies (a failed check exits at once) takes its master along; otherwise
      // it would retry a vanished Redis forever.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(127);
      if (pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus - 1, &set);
        sched_setaffinity(0, sizeof(set), &set);
      }
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      execve(argv[0], argv.data(), envp.data());
      std::fprintf(stderr, "master_bench: exec %s: %s\n", argv[0], std::strerror(errno));
      _exit(127);
    }
    close(fd);
    log_path_ = log_path;
    return Status::Ok();
  }

  pid_t pid() const { return pid_; }
  bool Exited(int* status) {
    if (pid_ <= 0) return true;
    if (waitpid(pid_, status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }

  // SIGTERM (the master releases its lease), SIGKILL after 5 s.
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (Clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(Ms(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::string LogTail(size_t bytes = 3000) const {
    std::ifstream in(log_path_);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all.size() > bytes ? all.substr(all.size() - bytes) : all;
  }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

// The Unix ms of the first log line containing `needle` ("2026-01-02T03:04:05.678Z ..."), or -1.
int64_t LogLineMs(const std::string& path, std::string_view needle) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) == std::string::npos || line.size() < 24) continue;
    struct tm tm = {};
    if (strptime(line.substr(0, 19).c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) continue;
    return static_cast<int64_t>(timegm(&tm)) * 1000 + std::atoi(line.substr(20, 3).c_str());
  }
  return -1;
}

// ---- one trial ------------------------------------------------------------------------------

struct Trial {
  double close_to_written = NAN;   // RESULT decide_ms
  double field_decide_ms = NAN;    // the incident's decide_ms
  double first_to_written = NAN;
  double open_to_decided = NAN;    // window opened (master log) → decided tick
  double steady_cpu_pct = NAN;
  double decision_cpu_pct = NAN;
  size_t events = 0;
  double others_pct = NAN;         // other processes' CPU during the trial, % of one core
  std::string incident_id;
};

void Pipeline(redis::Client& db, const std::vector<redis::Argv>& commands, std::string_view what) {
  if (commands.empty()) return;
  std::vector<redis::Reply> replies;
  Check(db.Pipeline(commands, &replies), what);
  for (const redis::Reply& r : replies) {
    if (r.is_error()) Die(fmt::format("{}: Redis answered {}", what, r.str()));
  }
}

// The workers' clocks: each node's worker writes its ranks' progress every 200 ms, their
// summaries and its heartbeat every second. Real workers are independent processes, so their
// phases are spread evenly over the period rather than all writing at once.
class Driver {
 public:
  Driver(SyntheticJob* job, redis::Client* db, int64_t now) : job_(job), db_(db) {
    const int nodes = job->nodes();
    next_progress_.resize(static_cast<size_t>(nodes));
    next_summary_.resize(static_cast<size_t>(nodes));
    for (int i = 0; i < nodes; ++i) {
      next_progress_[static_cast<size_t>(i)] = now + kProgressPeriodMs * i / nodes;
      next_summary_[static_cast<size_t>(i)] = now + kSummaryPeriodMs * i / nodes;
    }
  }

  // Everything at once (before the master starts: the state a running job has in Redis).
  void WriteAll(int64_t now) {
    std::vector<redis::Argv> cmds;
    for (int i = 0; i < job_->nodes(); ++i) {
      job_->ProgressCommand(i, now, hung_, &cmds);
      job_->SummaryCommand(i, now, hung_, &cmds);
      job_->HeartbeatCommands(i, now, &cmds);
    }
    Pipeline(*db_, cmds, "writing the synthetic workers' state");
  }

  void Tick(int64_t now) {
    std::vector<redis::Argv> cmds;
    for (int i = 0; i < job_->nodes(); ++i) {
      int64_t& progress = next_progress_[static_cast<size_t>(i)];
      if (now >= progress) {
        job_->ProgressCommand(i, now, hung_, &cmds);
        progress = std::max(progress + kProgressPeriodMs, now);
      }
      int64_t& summary = next_summary_[static_cast<size_t>(i)];
      if (now >= summary) {
        job_->SummaryCommand(i, now, hung_, &cmds);
        job_->HeartbeatCommands(i, now, &cmds);
        summary = std::max(summary + kSummaryPeriodMs, now);
      }
    }
    const auto start = Clock::now();
    Pipeline(*db_, cmds, "writing the synthetic workers' state");
    max_write_ms_ = std::max(max_write_ms_, MsSince(start));
  }
  void SetHung() { hung_ = true; }
  // The longest one tick's writes took (they delay the next events by as much).
  double max_write_ms() const { return max_write_ms_; }

 private:
  SyntheticJob* job_;
  redis::Client* db_;
  bool hung_ = false;
  std::vector<int64_t> next_progress_, next_summary_;
  double max_write_ms_ = 0;
};

// Sleeps to the next driver tick.
void Pace(Clock::time_point* next) {
  *next += Ms(kDriverTickMs);
  const auto now = Clock::now();
  if (*next < now) *next = now;
  std::this_thread::sleep_until(*next);
}

// The decision's steps as ftmaster runs them, timed in this process on the master's CPU,
// against the trial's final Redis state: where the time of close_to_written goes.
void Profile(const Options& o, const Layout& layout, const proto::Keys& keys,
             const redis::Endpoint& endpoint) {
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
  redis::Client c;
  Check(c.Connect(endpoint, Ms(2000), Ms(10000)), "profile: connecting to Redis");
  master::BadValues bad;
  master::DecodedHash<proto::RankProgress> progress("progress");
  master::DecodedHash<proto::Membership> ranks("ranks");
  redis::Reply reply;

  auto t = Clock::now();
  Check(c.Run({"HGETALL", keys.Progress()}, &reply), "profile: HGETALL progress");
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
  Check(c.Run({"XRANGE", keys.Events(), "-", "+", "COUNT", "100000"}, &reply),
        "profile: XRANGE events");
  std::vector<master::StreamEntry> entries;
  master::ParseStream(reply, &entries);
  std::vector<proto::Event> events;
  for (const master::StreamEntry& e : entries) {
    proto::Event ev;
    if (master::DecodeEventEntry(e, &ev).ok()) events.push_back(std::move(ev));
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

  // The steady-state round (every 500 ms, or 3x its cost): summaries into the timeout model
  // and the straggler detector. Every summary changed since the last read (workers rewrite
  // them every second), so all are decoded, as here.
  master::DecodedHash<proto::RankSummary> summaries("summary");
  t = Clock::now();
  Check(c.Run({"HGETALL", keys.Summaries()}, &reply), "profile: HGETALL summary");
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
              "encode incident %.2f ms (%zu bytes); decision '%s' saving %zu ranks; "
              "summary round: HGETALL summary %.1f ms, decode %.1f ms, timeouts+stragglers "
              "%.1f ms\n",
              layout.world(), hget_progress, static_cast<double>(progress_bytes) / 1e6,
              decode_progress, hget_ranks, decode_ranks, compare_ranks, read_events,
              events.size(), can_close, attribute, decide, encode, incident_bytes,
              decision.decision.c_str(), decision.save.size(), hget_summary, decode_summary,
              model);
  std::fflush(stdout);
  sched_setaffinity(0, sizeof(saved), &saved);
}

Trial RunTrial(const Options& o, const Layout& layout, int trial, bool profile) {
  Trial out;
  const int n = layout.world();
  const OtherLoad others;
  redis::testing::RedisServerOptions ropts;
  ropts.binary = o.redis_server;
  redis::testing::RedisServer server(ropts);
  Check(server.Start(), "starting redis-server");
  redis::Client db;
  Check(db.Connect(server.endpoint(), Ms(2000), Ms(30000)), "connecting to the bench's Redis");

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
  Driver driver(&sj, &db, UnixMs());
  driver.WriteAll(UnixMs());

  char dir_template[] = "/tmp/ft-master-bench-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) Die(fmt::format("mkdtemp: {}", std::strerror(errno)));
  const std::string log_path = std::string(dir) + "/ftmaster.log";
  Master master;
  Check(master.Start(o, job, server.url(), server.password(), layout, log_path),
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
  const auto ready_deadline = Clock::now() + std::chrono::seconds(30);
  double timeout_ms = -1;
  while (timeout_ms < 0) {
    alive();
    if (Clock::now() > ready_deadline) fail("no timeout table published within 30 s");
    driver.Tick(UnixMs());
    redis::Reply table;
    Check(db.Run({"GET", sj.keys().Timeouts()}, &table), "reading the timeout table");
    if (table.is_string()) {
      proto::TimeoutTable tt;
      Check(proto::Decode(table.str(), &tt), "decoding the published timeout table");
      timeout_ms = tt.default_ms;
      const uint64_t tp_comm = layout.TpComm(hang.xd, hang.xp);
      for (const proto::TimeoutEntry& e : tt.entries) {
        if (e.comm_id == tp_comm && e.op == "allreduce" && e.bucket == proto::SizeBucket(4 << 20)) {
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

  // Steady state: the master's CPU over steady_s.
  const double cpu_a = CpuSeconds(master.pid());
  const auto steady_start = Clock::now();
  const auto steady = std::chrono::milliseconds(static_cast<int64_t>(o.steady_s * 1000));
  for (auto until = steady_start + steady; Clock::now() < until; Pace(&next)) {
    driver.Tick(UnixMs());
  }
  const double cpu_b = CpuSeconds(master.pid());
  out.steady_cpu_pct = (cpu_b - cpu_a) / (MsSince(steady_start) / 1000) * 100;
  alive();

  // The hang: rank X makes no call from t0 on; the job backs up behind it.
  sj.SetHangStart(UnixMs());
  driver.SetHung();
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
  out.close_to_written = static_cast<double>(written_ms - incident.window_closed_unix_ms);
  out.field_decide_ms = incident.decide_ms;
  out.first_to_written = static_cast<double>(written_ms - incident.first_event_unix_ms);
  const int64_t opened = LogLineMs(log_path, "incident window opened");
  if (opened > 0) out.open_to_decided = static_cast<double>(incident.decided_unix_ms - opened);

  master.Stop();
  out.others_pct = others.Pct();
  std::printf("bench: ranks=%d trial %d/%d: decide_ms=%.0f (window closed -> incident written), "
              "incident decide_ms=%.0f (first event -> decided; window opened -> decided %.0f), "
              "first event -> written %.0f ms; master cpu %.1f%% steady, %.1f%% first event -> "
              "written; %zu timeout events (timeout %.0f ms); rank %d named (%s, decision %s); "
              "setup %.0f ms, longest driver write %.0f ms; other processes %.0f%% of a core\n",
              n, trial + 1, o.trials, out.close_to_written, out.field_decide_ms,
              out.open_to_decided, out.first_to_written, out.steady_cpu_pct,
              out.decision_cpu_pct, out.events, timeout_ms, hang.stopped, incident.kind.c_str(),
              incident.decision.c_str(), build_ms, driver.max_write_ms(), out.others_pct);
  std::fflush(stdout);
  if (profile) Profile(o, layout, sj.keys(), server.endpoint());

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

}  // namespace
}  // namespace ft::bench

int main(int argc, char** argv) {
  using namespace ft::bench;
  const Options o = ParseOptions(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (access(o.ftmaster.c_str(), X_OK) != 0) {
    Die(fmt::format("ftmaster not found at {}: build it (make build, or cmake --build <build> "
                    "--target ftmaster) or pass --ftmaster PATH", o.ftmaster));
  }
  if (FindProgram(o.redis_server).empty()) {
    Die(fmt::format("{} not found: install redis-server (scripts/install-deps.sh) or pass "
                    "--redis-server PATH", o.redis_server));
  }
  PinDriver(o.pin);
  std::printf("bench: ftmaster %s, %d CPUs (%s), FT_HANG_WINDOW=%s, %d trials per size, "
              "timeout events from %s\n",
              o.ftmaster.c_str(), CpuCount(),
              o.pin && CpuCount() >= 2 ? "ftmaster pinned alone to the last" : "unpinned",
              o.hang_window.c_str(), o.trials,
              o.all_events ? "every waiting rank" : "the stopped rank's tp peers");
  std::fflush(stdout);

  std::vector<std::string> results;
  for (int n : o.ranks) {
    const Layout layout = Layout::ForRanks(n);
    std::vector<double> decide, field, first, steady, decision, others;
    for (int trial = 0; trial < o.trials; ++trial) {
      const Trial t = RunTrial(o, layout, trial, o.profile && trial == o.trials - 1);
      decide.push_back(t.close_to_written);
      field.push_back(t.field_decide_ms);
      first.push_back(t.first_to_written);
      steady.push_back(t.steady_cpu_pct);
      decision.push_back(t.decision_cpu_pct);
      others.push_back(t.others_pct);
    }
    std::printf("bench: ranks=%d (%s): medians of %d: decide_ms=%.0f, incident decide_ms=%.0f, "
                "first event -> written %.0f ms, master cpu %.1f%% steady / %.1f%% deciding; "
                "other processes %.0f%% of a core\n",
                n, layout.Describe().c_str(), o.trials, Median(decide), Median(field),
                Median(first), Median(steady), Median(decision), Median(others));
    if (Median(others) > 25) {
      std::printf("bench: warning: other processes used %.0f%% of a core during the trials of "
                  "ranks=%d; on a 2-CPU machine that is the noise of these figures: run again "
                  "when the machine is idle\n", Median(others), n);
    }
    std::fflush(stdout);
    results.push_back(fmt::format("RESULT master ranks={} decide_ms={:.0f} cpu_pct={:.1f}", n,
                                  Median(decide), Median(steady)));
  }
  for (const std::string& line : results) std::printf("%s\n", line.c_str());
  return 0;
}

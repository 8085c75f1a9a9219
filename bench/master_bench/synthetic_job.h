// master_bench: the synthetic job's workers: what each node's ftworker would write to Redis,
// encoded by proto/codec.h (membership, progress tables, summaries, heartbeats and timeout
// events), for a job that runs and then hangs on one rank. It builds Redis commands; the
// caller sends them (worker_driver.h paces them as the workers would).
// One SyntheticJob is used by one thread: rendering shares a scratch buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/master_bench/layout.h"
#include "bench/master_bench/value_template.h"
#include "common/status.h"
#include "proto/keys.h"
#include "proto/messages.h"
#include "redis/client.h"

namespace ft::bench {

constexpr int kStepMs = 100;           // the synthetic job's step
constexpr int kTpOpsPerStep = 4;       // tp allreduces per step; dp: 1; pp: 2 p2p ops
constexpr int64_t kProgressPeriodMs = 200;  // FT_REPORT_INTERVAL's default
constexpr int64_t kProgressRefreshMs = 60000;  // FT_PROGRESS_REFRESH's default
constexpr int64_t kSummaryPeriodMs = 1000;  // FT_SUMMARY_INTERVAL's default
constexpr int64_t kSummaryRefreshMs = 10000;  // FT_SUMMARY_REFRESH's default
constexpr int64_t kHeartbeatPeriodMs = 1000;  // the worker heartbeat's period
constexpr int64_t kDriverTickMs = 10;       // FT_WORKER_TICK's default
constexpr const char* kEventsCap = "100000";  // as ftworker's reporter

// What a rank is doing once the hang is in.
enum class Role {
  kStopped,   // the injected rank: never enters tp collective s (a host-side hang)
  kTpPeer,    // its tp group: in collective s, waiting on it
  kChain,     // its pipeline (same dp replica, other stages): p2p toward the stopped stage
  kDpWaiter,  // every other replica: finished the step, waiting in the dp allreduce
};

struct Hang {
  int stopped = -1;      // the rank
  int xt = 0, xd = 0, xp = 0;
  int64_t t0 = 0;        // Unix ms: the stopped rank's last call
  uint64_t k0 = 0;       // steps completed before it
  double timeout_ms = 1000;
};

// The changing numbers of one rank's progress table and summary (synthetic_job.cc).
struct ProgressDyn;
struct SummaryDyn;

class SyntheticJob {
 public:
  SyntheticJob(Layout layout, std::string job, Hang hang, int64_t start_ms)
      : layout_(layout), keys_(job), hang_(hang), start_ms_(start_ms) {}

  // Encodes every rank's membership and the templates of its progress (running and hung)
  // and summary.
  Status Build();

  const proto::Keys& keys() const { return keys_; }
  const Hang& hang() const { return hang_; }
  void SetHangStart(int64_t t0) {
    hang_.t0 = t0;
    hang_.k0 = static_cast<uint64_t>((t0 - start_ms_) / kStepMs);
  }
  void SetTimeout(double ms) { hang_.timeout_ms = ms; }
  Role role(int r) const { return roles_[static_cast<size_t>(r)]; }

  // One HSET per node (its worker's ranks) for membership, progress, summaries.
  void MembershipCommands(std::vector<redis::Argv>* out) const;
  void ProgressCommand(int node, int64_t now, bool hung, std::vector<redis::Argv>* out);
  // Rank r's table alone (the reporter writes only the tables that are due).
  void RankProgressCommand(int r, int64_t now, bool hung, std::vector<redis::Argv>* out);
  // Once hung: whether rank r is attentive (ftworker/report_pacing.h): it has waited in an op,
  // or its host has been silent, for half the timeout.
  bool Attentive(int r, int64_t now) const {
    return now - WaitStart(r) >= static_cast<int64_t>(hang_.timeout_ms / 2);
  }
  void SummaryCommand(int node, int64_t now, bool hung, std::vector<redis::Argv>* out);

  // As ftworker's reporter: the heartbeat key with a 5 s TTL and the workers set.
  void HeartbeatCommands(int node, int64_t now, std::vector<redis::Argv>* out) const;

  int nodes() const { return layout_.nodes(); }

  // When a waiting rank's wait began: its tp peers at t0; the pipeline backs up stage by
  // stage; other replicas reach their dp allreduce within about a step.
  int64_t WaitStart(int r) const;

  // The timeout event rank r's worker raises once its wait passes the timeout, with the
  // rank's progress at that moment, as ftworker writes it (XADD with kind, rank, node, json).
  struct PendingEvent {
    int64_t due = 0;
    int rank = -1;
    redis::Argv xadd;
    redis::Argv hset;  // the reporter also writes the event's table as the rank's progress
  };
  std::vector<PendingEvent> Events(bool all);

 private:
  Role RoleOf(int r) const;
  static int Pid(int r) { return 100000 + r; }
  uint64_t Incarnation() const { return static_cast<uint64_t>(start_ms_ - 60000) * 1000000; }

  // The rows of rank r, with op/peer for its state; sequence numbers and ages are left 0.
  std::vector<proto::CommRow> Rows(int r, bool hung) const;
  proto::RankProgress Progress(int r, bool hung, const ProgressDyn& dyn) const;
  // Per row kind, the sequence numbers after k steps.
  static uint64_t PerStep(const proto::CommRow& row);
  ProgressDyn RunningDyn(int r, int64_t now) const;
  ProgressDyn HungDyn(int r, int64_t now) const;
  void RenderProgress(int r, bool hung, int64_t now, std::string* out);
  Status BuildSummary(int r);
  void RenderSummary(int r, int64_t now, bool hung, std::string* out);

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

}  // namespace ft::bench

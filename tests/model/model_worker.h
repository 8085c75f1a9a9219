// One node's ftworker in the model: the real Reporter (ftworker/reporter.h) and the real
// RestorePlanSync (ftworker/ckpt/restore_plan_sync.h) on their own FakeStore connection to the
// shared FakeRedis, around what ftworker's daemon does with them (ftworker/daemon.cc): the
// node's memberships, progress and exit events; its arenas' copies, both slots, as CkptKeeper
// reports them (ftworker/ckpt/ckpt_keeper.cc ScanArenas: the committed slot's copy and the other
// slot's when it holds another step, torn included); the node's command stream (save, stop,
// with CommandRunner's staleness rule); and the node's plan file, settling after a rank's end
// (daemon.cc: not for a rank this worker stopped when the plan in hand postdates the stop).
// A restart is a new worker: a new Reporter, keeper state and RestorePlanSync; what the old one
// reported stays in Redis.
#ifndef FT_TESTS_MODEL_MODEL_WORKER_H_
#define FT_TESTS_MODEL_MODEL_WORKER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ftmaster/core/tests/job_fixture.h"
#include "ftworker/ckpt/restore_plan_sync.h"
#include "ftworker/reporter.h"
#include "proto/keys.h"
#include "redis/fake/fake_store.h"
#include "tests/model/eval_shim.h"
#include "tests/model/model_job.h"

namespace ft::model {

class ModelWorker {
 public:
  using Trace = std::function<void(const std::string&)>;

  ModelWorker(redis::FakeRedis* server, std::string job, const proto::Keys* keys, std::string node, std::vector<int> ranks,
              std::string plan_dir, master::testing::Job* fixture, Trace trace);
  ~ModelWorker();

  void Start(int64_t now_ms);
  // clean: the daemon's shutdown (RemoveFile); else SIGKILLed (the file stays).
  void Stop(bool clean);
  bool running() const { return running_; }
  // Its Redis writes wait in the outbox until then (a slow or cut link).
  void HoldWrites(int64_t until_ms) { hold_until_ms_ = until_ms; }

  void OnExit(const ExitNote& note) { pending_exits_.push_back(note); }
  void OnAck(const SaveAck& ack) { pending_acks_.push_back(ack); }
  void Tick(int64_t now_ms, ModelJob& job);

  const std::string& node() const { return node_; }
  const std::vector<int>& ranks() const { return ranks_; }
  std::string plan_path() const;

 private:
  struct Ended {
    ExitNote note;
    uint64_t incarnation = 0;
  };
  void ReportExit(const ExitNote& note, ModelJob& job, int64_t now_ms);
  void ReportMemberships(ModelJob& job, int64_t now_ms);
  void RunCommands(ModelJob& job, int64_t now_ms);
  void ScanArenas(const ModelJob& job, int64_t now_ms);
  proto::Membership MembershipOf(int rank, const ModelJob& job, int64_t now_ms) const;

  redis::FakeRedis* server_;
  std::string job_;
  const proto::Keys* keys_;
  std::string node_;
  std::vector<int> ranks_;
  std::string plan_dir_;
  master::testing::Job* fixture_;
  Trace trace_;

  bool running_ = false;
  std::unique_ptr<redis::FakeStore> store_;
  std::unique_ptr<EvalShim> shim_;
  std::unique_ptr<worker::Reporter> reporter_;
  std::unique_ptr<worker::RestorePlanSync> plan_sync_;
  int64_t hold_until_ms_ = 0;
  int64_t next_report_ms_ = 0;
  int64_t next_scan_ms_ = 0;
  size_t command_cursor_ = 0;  // entries of the node's command stream already read (kept across restarts)
  std::vector<ExitNote> pending_exits_;
  std::vector<SaveAck> pending_acks_;
  std::map<int, Ended> ended_;                  // rank -> how its current process ended
  std::map<std::pair<int64_t, int>, std::string> reported_;  // (step, rank) -> copy as last reported
};

}  // namespace ft::model

#endif  // FT_TESTS_MODEL_MODEL_WORKER_H_

#include "group.h"

#include <thread>
#include <vector>

namespace gpusim::nccl {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<OpArgs> ops;
  std::vector<CommJob> jobs;
  ncclResult_t error = ncclSuccess;
};
thread_local GroupState tls_group;

ncclResult_t RunChain(std::vector<CommJob>& chain) {
  ncclResult_t first = ncclSuccess;
  for (CommJob& j : chain) {
    ncclResult_t r = ncclInternalError;
    try {
      r = j.run();
    } catch (...) {
    }
    if (first == ncclSuccess) first = r;
  }
  return first;
}

// Runs the jobs grouped by chain; background: detached threads, returns ncclInProgress.
ncclResult_t RunJobs(std::vector<CommJob>&& jobs) {
  std::vector<std::vector<CommJob>> chains;
  bool background = false;
  for (CommJob& j : jobs) {
    background |= !j.blocking;
    auto it = chains.begin();
    while (it != chains.end() && it->front().chain != j.chain) ++it;
    if (it == chains.end()) {
      chains.emplace_back();
      it = chains.end() - 1;
    }
    it->push_back(std::move(j));
  }
  if (background) {
    for (auto& c : chains) {
      std::thread([c = std::move(c)]() mutable { RunChain(c); }).detach();
    }
    return ncclInProgress;
  }
  if (chains.size() == 1) return RunChain(chains.front());
  std::vector<ncclResult_t> results(chains.size(), ncclSuccess);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < chains.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = RunChain(chains[i]); });
  }
  for (auto& t : threads) t.join();
  for (ncclResult_t r : results) {
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

}  // namespace

bool InGroup() { return tls_group.depth > 0; }

ncclResult_t EnqueueOp(OpArgs&& op) {
  if (InGroup()) {
    tls_group.ops.push_back(std::move(op));
    return ncclSuccess;
  }
  std::vector<OpArgs> v;
  v.push_back(std::move(op));
  return Submit(std::move(v));
}

ncclResult_t EnqueueCommJob(CommJob&& job) {
  if (InGroup()) {  // the group's end reports ncclInProgress for nonblocking work
    tls_group.jobs.push_back(std::move(job));
    return ncclSuccess;
  }
  std::vector<CommJob> v;
  v.push_back(std::move(job));
  return RunJobs(std::move(v));
}

ncclResult_t GroupFail(ncclResult_t r) {
  if (InGroup() && tls_group.error == ncclSuccess) tls_group.error = r;
  return r;
}

ncclResult_t GroupStart() {
  ++tls_group.depth;
  return ncclSuccess;
}

namespace {
// Ends one nesting level; at the outermost, hands back the queued work.
ncclResult_t EndLevel(bool* outermost, std::vector<OpArgs>* ops, std::vector<CommJob>* jobs,
                      ncclResult_t* error) {
  GroupState& g = tls_group;
  if (g.depth == 0) return ncclInvalidUsage;
  *outermost = --g.depth == 0;
  if (!*outermost) return ncclSuccess;
  *ops = std::move(g.ops);
  *jobs = std::move(g.jobs);
  *error = g.error;
  g.ops.clear();
  g.jobs.clear();
  g.error = ncclSuccess;
  return ncclSuccess;
}

void Drop(std::vector<CommJob>& jobs, ncclResult_t why) {
  for (CommJob& j : jobs) {
    if (j.drop) j.drop(why);
  }
}
}  // namespace

ncclResult_t GroupEnd() {
  bool outermost = false;
  std::vector<OpArgs> ops;
  std::vector<CommJob> jobs;
  ncclResult_t error = ncclSuccess;
  ncclResult_t r = EndLevel(&outermost, &ops, &jobs, &error);
  if (r != ncclSuccess || !outermost) return r;
  if (error != ncclSuccess) {
    Drop(jobs, error);
    return error;
  }
  ncclResult_t result = ncclSuccess;
  if (!jobs.empty()) result = RunJobs(std::move(jobs));
  if (!ops.empty()) {
    ncclResult_t s = Submit(std::move(ops));
    if (result == ncclSuccess || (result == ncclInProgress && s != ncclSuccess)) result = s;
  }
  return result;
}

ncclResult_t GroupSimulateEnd(ncclSimInfo_t* info) {
  if (info == nullptr) return ncclInvalidArgument;
  bool outermost = false;
  std::vector<OpArgs> ops;
  std::vector<CommJob> jobs;
  ncclResult_t error = ncclSuccess;
  ncclResult_t r = EndLevel(&outermost, &ops, &jobs, &error);
  if (r != ncclSuccess) return r;
  // A simulation launches nothing: the queued work is dropped.
  Drop(jobs, ncclInvalidUsage);
  info->estimatedTime = 0.0f;
  return ncclSuccess;
}

}  // namespace gpusim::nccl

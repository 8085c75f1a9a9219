#include "preload/ckpt/ckpt_restore.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "include/ft/ft.h"
#include "jitckpt/restore_loader.h"
#include "jitckpt/safe_name.h"
#include "preload/ckpt/agent_host.h"

namespace ft::preload::agent {

bool SourceOnNode(const ckpt::NodePlan& plan, int rank, std::string_view node) {
  const ckpt::PlanRank* mine = plan.step < 0 ? nullptr : plan.Find(rank);
  if (mine == nullptr) return true;  // nothing to restore: nothing to wait for
  for (const ckpt::PlanSource& src : mine->sources) {
    if (ckpt::SafeNodeName(src.node) == ckpt::SafeNodeName(node)) return true;
    // The shared remote directory is read from anywhere.
    if (!plan.remote_dir.empty() && std::find(src.tiers.begin(), src.tiers.end(), "remote") != src.tiers.end()) {
      return true;
    }
  }
  return false;
}

Status WaitForPlan(const std::string& path, Duration wait, int rank, std::string_view node, ckpt::NodePlan* plan) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  Status last;
  std::string settling;  // what the last plan read said it waits for
  bool said_pull = false;
  for (;;) {
    Status read = ckpt::ReadLiveNodePlan(path, plan);  // a killed worker's plan is no plan
    // A final plan whose copies of this rank's shard are all on other nodes: the worker pulls
    // one here once it sees this rank (it learns of a rank from its segment, a poll later than
    // the rank reads the plan: a replacement node's second rank read the plan the first one's
    // pull had just released, and found nothing to restore). Wait for the pulled copy; past the
    // wait the plan is taken as it is and the restore says what it lacked.
    if (read.ok() && plan->settling.empty()) {
      if (SourceOnNode(*plan, rank, node) || std::chrono::steady_clock::now() >= deadline) return read;
      if (!said_pull) {
        FT_LOG(Info, Ckpt, "ft_restore waits for this node's worker to pull a copy of step {} for rank {} (at most "
               "{}): the plan's copies of its shard are all on other nodes", plan->step, rank, FormatDuration(wait));
        said_pull = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (read.ok() && plan->settling != settling) {
      // Said once per reason: a relaunch that came before the master judged the copies.
      FT_LOG(Info, Ckpt, "ft_restore waits for the final restore plan (at most {}): {}", FormatDuration(wait),
             plan->settling);
      settling = plan->settling;
    }
    if (!read.ok() && read.code() != StatusCode::kNotFound) last = read;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!settling.empty()) {
    return Status::Timeout("the restore plan at " + path + " was still settling after " + FormatDuration(wait) +
                           " (FT_RESTORE_WAIT): " + settling + "; not starting from scratch over a checkpoint "
                           "that may be on its way — relaunch, or raise FT_RESTORE_WAIT");
  }
  std::string message = "no restore plan at " + path + " after " + FormatDuration(wait) + " (FT_RESTORE_WAIT): ";
  message += ckpt::NodePlanWriterRuns(path)
                 ? "ftworker runs on this node (it holds " + ckpt::NodePlanLockPath(path) + ") and has not written "
                       "it: it does once it has read the job's checkpoints from Redis (is Redis reachable from this "
                       "node, or failing over?); its log says what it waits for"
                 : "is ftworker running on this node?";
  if (!last.ok()) message += " The last read failed: " + last.ToString();
  return Status::Timeout(message);
}

namespace {

// The restore's copy to the buffers, a chunk at a time as each verifies: host buffers by
// memcpy, device ones on the agent's stream (asynchronous from the pinned arena), so the
// device copy of chunk c overlaps the verification of chunk c + 1 and a restore runs at the
// pace of the slower of the two rather than their sum. The first failure is kept and no copy
// is issued after it.
class BufferSink : public ckpt::RestoreSink {
 public:
  BufferSink(const std::vector<Registered>& buffers, AgentCuda* cuda) : buffers_(buffers), cuda_(cuda) {}

  // The agent's stream is non-blocking: nothing orders it after work the app already queued
  // (initialisation kernels, a cudaMemset on the legacy stream), which would otherwise land on
  // top of the restored bytes.
  Status Start() {
    bool any_device = false;
    for (const Registered& b : buffers_) any_device |= b.where != Registered::Where::kHost;
    if (!any_device) return Status::Ok();
    auto device_sync = FT_HOST_CUDA(cudaDeviceSynchronize);
    if (device_sync == nullptr) return Status::Unavailable("cudaDeviceSynchronize not found");
    return CudaStatus(device_sync(), "cudaDeviceSynchronize (before restore)");
  }

  void SourceBegins() override { (void)Drain(); }

  void Verified(const ckpt::Manifest& m, size_t chunk, const uint8_t* data) override {
    if (!status_.ok()) return;
    wrote_ = true;
    const uint64_t begin = m.chunk_begin(chunk), end = m.chunk_end(chunk);
    // The first buffer that ends after `begin` (buffers are in offset order).
    auto it = std::partition_point(buffers_.begin(), buffers_.end(),
                                   [&](const Registered& b) { return b.offset + b.bytes <= begin; });
    for (; it != buffers_.end() && it->offset < end; ++it) {
      const Registered& b = *it;
      const uint64_t lo = std::max(begin, b.offset), hi = std::min(end, b.offset + b.bytes);
      if (lo >= hi) continue;
      if (b.where == Registered::Where::kHost) {
        std::memcpy(b.ptr + (lo - b.offset), data + lo, hi - lo);
        continue;
      }
      auto copy = FT_HOST_CUDA(cudaMemcpyAsync);
      if (copy == nullptr) {
        status_ = Status::Unavailable("cudaMemcpyAsync not found");
        return;
      }
      const cudaMemcpyKind kind =
          b.where == Registered::Where::kDevice ? cudaMemcpyHostToDevice : cudaMemcpyDefault;
      status_ = CudaStatus(copy(b.ptr + (lo - b.offset), data + lo, hi - lo, kind, cuda_->stream()),
                           "cudaMemcpyAsync (host to device)");
      if (!status_.ok()) return;
      pending_ = true;
    }
  }

  // Waits for the copies issued so far; the first failure of any.
  Status Drain() {
    if (!pending_) return status_;
    pending_ = false;
    auto sync = FT_HOST_CUDA(cudaStreamSynchronize);
    Status synced = sync == nullptr ? Status::Unavailable("cudaStreamSynchronize not found")
                                    : CudaStatus(sync(cuda_->stream()), "cudaStreamSynchronize (restore)");
    if (status_.ok()) status_ = synced;
    return status_;
  }

  bool wrote() const { return wrote_; }  // some bytes reached the buffers

 private:
  const std::vector<Registered>& buffers_;
  AgentCuda* cuda_;
  Status status_;
  bool pending_ = false;
  bool wrote_ = false;
};

}  // namespace

RestoreOutcome RestoreFromPlan(const ckpt::NodePlan& plan, const RestoreTarget& target,
                               AgentCuda* cuda) {
  RestoreOutcome out;
  auto start = std::chrono::steady_clock::now();
  BufferSink sink(*target.buffers, cuda);
  Status ready = cuda->Prepare(target.device);
  if (ready.ok()) ready = sink.Start();
  if (!ready.ok()) {
    out.result = FT_CUDA_ERROR;
    out.message = "ft_restore: preparing the copy to the registered buffers: " + ready.ToString() +
                  "; nothing was restored";
    return out;
  }
  ckpt::RestoreResult loaded;
  Status s = ckpt::LoadForRestore(plan, target.rank, target.node, target.layout, target.arena,
                                  &loaded, &sink, target.verify_threads);
  // Every copy issued has landed (or failed) before ft_restore returns, whatever the verdict.
  Status copied = sink.Drain();
  // The loader logs each source it skipped, and why.
  if (!s.ok()) {
    out.message = "ft_restore: " + s.ToString();
    if (sink.wrote()) {
      // A source failed after chunks of it had verified and been copied, and no later source
      // completed: those chunks are the checkpoint's, the rest is what the app had.
      out.message += "; the registered buffers hold part of the checkpoint (the chunks that verified "
                     "before the last source failed): re-initialize them before training from scratch";
    } else {
      out.message += "; nothing was restored";
    }
    switch (s.code()) {
      case StatusCode::kNotFound: out.result = FT_NO_CHECKPOINT; break;
      case StatusCode::kInvalidArgument: out.result = FT_LAYOUT_MISMATCH; break;
      default: out.result = FT_CORRUPT; break;
    }
    return out;
  }
  if (!copied.ok()) {
    out.result = FT_CUDA_ERROR;
    out.message = "ft_restore: copying the verified copy to the registered buffers: " +
                  copied.ToString();
    return out;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  FT_LOG(Info, Ckpt, "restored step {} from {} ({} bytes) in {:.3f} s", loaded.step,
         loaded.source, loaded.manifest.data_bytes, seconds);
  out.result = FT_OK;
  out.step = loaded.step;
  return out;
}

}  // namespace ft::preload::agent

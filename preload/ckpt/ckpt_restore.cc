#include "preload/ckpt/ckpt_restore.h"

#include <time.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "include/ft/ft.h"
#include "jitckpt/restore_loader.h"
#include "preload/hook_runtime.h"

namespace ft::preload::agent {

Status WaitForPlan(const std::string& path, Duration wait, ckpt::NodePlan* plan) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  Status last;
  std::string settling;  // what the last plan read said it waits for
  for (;;) {
    Status read = ckpt::ReadLiveNodePlan(path, plan);  // a killed worker's plan is no plan
    if (read.ok() && plan->settling.empty()) return read;
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
  std::string message = "no restore plan at " + path + " after " + FormatDuration(wait) +
                        ": is ftworker running on this node (FT_RESTORE_WAIT)?";
  if (!last.ok()) message += " The last read failed: " + last.ToString();
  return Status::Timeout(message);
}

namespace {

Status CopyToBuffers(const RestoreTarget& target, AgentCuda* cuda) {
  if (Status s = cuda->Prepare(target.device); !s.ok()) return s;
  // The copy the loader just committed (this process is the arena's only writer).
  ckpt::Manifest committed;
  uint64_t generation = 0;
  if (Status s = target.arena->ReadCommitted(&committed, &generation); !s.ok()) return s;
  const uint8_t* data = target.arena->data(generation);
  bool device_work = false;
  bool any_device = false;
  for (const Registered& b : *target.buffers) any_device |= b.where != Registered::Where::kHost;
  if (any_device) {
    // The agent's stream is non-blocking: nothing orders it after work the app already
    // queued (initialisation kernels, a cudaMemset on the legacy stream), which would
    // otherwise land on top of the restored bytes.
    auto device_sync = FT_REAL_CUDA(cudaDeviceSynchronize);
    if (device_sync == nullptr) return Status::Unavailable("cudaDeviceSynchronize not found");
    if (Status s = CudaStatus(device_sync(), "cudaDeviceSynchronize (before restore)"); !s.ok()) {
      return s;
    }
  }
  for (const Registered& b : *target.buffers) {
    if (b.where == Registered::Where::kHost) {
      std::memcpy(b.ptr, data + b.offset, b.bytes);
      continue;
    }
    auto copy = FT_REAL_CUDA(cudaMemcpyAsync);
    if (copy == nullptr) return Status::Unavailable("cudaMemcpyAsync not found");
    cudaMemcpyKind kind =
        b.where == Registered::Where::kDevice ? cudaMemcpyHostToDevice : cudaMemcpyDefault;
    if (Status s = CudaStatus(copy(b.ptr, data + b.offset, b.bytes, kind, cuda->stream()),
                              "cudaMemcpyAsync (host to device)");
        !s.ok()) {
      return s;
    }
    device_work = true;
  }
  if (!device_work) return Status::Ok();
  auto sync = FT_REAL_CUDA(cudaStreamSynchronize);
  if (sync == nullptr) return Status::Unavailable("cudaStreamSynchronize not found");
  return CudaStatus(sync(cuda->stream()), "cudaStreamSynchronize (restore)");
}

}  // namespace

RestoreOutcome RestoreFromPlan(const ckpt::NodePlan& plan, const RestoreTarget& target,
                               AgentCuda* cuda) {
  RestoreOutcome out;
  auto start = std::chrono::steady_clock::now();
  ckpt::RestoreResult loaded;
  Status s = ckpt::LoadForRestore(plan, target.rank, target.node, target.layout, target.arena,
                                  &loaded);
  // The loader logs each source it skipped, and why.
  if (!s.ok()) {
    out.message = "ft_restore: " + s.ToString();
    switch (s.code()) {
      case StatusCode::kNotFound: out.result = FT_NO_CHECKPOINT; break;
      case StatusCode::kInvalidArgument: out.result = FT_LAYOUT_MISMATCH; break;
      default: out.result = FT_CORRUPT; break;
    }
    return out;
  }
  if (Status copied = CopyToBuffers(target, cuda); !copied.ok()) {
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

#include "preload/ckpt/ckpt_save.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "preload/ckpt/agent_host.h"
#include "preload/ckpt/ckpt_checksummer.h"

namespace ft::preload::agent {

namespace {

constexpr std::chrono::microseconds kChunkPoll{100};

uint64_t UnixNowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The layout's gaps (alignment padding between buffers and at the end) are zero in every copy,
// so replicas' chunk checksums agree whatever an earlier save or a peer left there.
void ZeroGaps(const std::vector<Registered>& buffers, uint64_t data_bytes, uint8_t* data) {
  uint64_t at = 0;
  for (const Registered& b : buffers) {
    if (b.offset > at) std::memset(data + at, 0, b.offset - at);
    at = b.offset + b.bytes;
  }
  if (data_bytes > at) std::memset(data + at, 0, data_bytes - at);
}

class ChunkCopier {
 public:
  ChunkCopier(const SaveJob& job, AgentCuda* cuda) : job_(job), cuda_(cuda) {}

  // Issues the copies of chunk c (host buffers are copied now); records the chunk's event
  // when it has device work and `record`. Chunks must be issued in order.
  Status Issue(size_t c, bool* has_device_work, bool record = true) {
    const ckpt::Manifest& m = job_.manifest;
    uint64_t begin = m.chunk_begin(c), end = m.chunk_end(c);
    uint8_t* data = job_.arena->write_data();
    const auto& buffers = *job_.buffers;
    *has_device_work = false;
    while (next_ < buffers.size() && buffers[next_].offset + buffers[next_].bytes <= begin) ++next_;
    for (size_t i = next_; i < buffers.size() && buffers[i].offset < end; ++i) {
      const Registered& b = buffers[i];
      uint64_t lo = std::max(begin, b.offset), hi = std::min(end, b.offset + b.bytes);
      if (lo >= hi) continue;
      const uint8_t* from = b.ptr + (lo - b.offset);
      if (b.where == Registered::Where::kHost) {
        std::memcpy(data + lo, from, hi - lo);
        continue;
      }
      auto copy = FT_HOST_CUDA(cudaMemcpyAsync);
      if (copy == nullptr) return Status::Unavailable("cudaMemcpyAsync not found");
      cudaMemcpyKind kind =
          b.where == Registered::Where::kDevice ? cudaMemcpyDeviceToHost : cudaMemcpyDefault;
      if (Status s = CudaStatus(copy(data + lo, from, hi - lo, kind, cuda_->stream()),
                                "cudaMemcpyAsync (device to host)");
          !s.ok()) {
        return s;
      }
      *has_device_work = true;
    }
    if (*has_device_work && record) {
      auto record = FT_HOST_CUDA(cudaEventRecord);
      if (record == nullptr) return Status::Unavailable("cudaEventRecord not found");
      return CudaStatus(record(cuda_->event(c), cuda_->stream()), "cudaEventRecord");
    }
    return Status::Ok();
  }

 private:
  const SaveJob& job_;
  AgentCuda* cuda_;
  size_t next_ = 0;  // the first buffer that may overlap the next chunk
};

// Waits for chunk c's copy by polling its event, asleep between polls, not in
// cudaEventSynchronize: on an event made without cudaEventBlockingSync, as the agent's are, that
// call spins a core for the whole copy, the core the checksum helpers and the app want. (With the
// flag, every chunk's completion would wake this thread: through the driver's interrupt on a
// GPU, through the copy engine's own thread on gpusim, on the save's critical path.) A poll's
// sleep is about a chunk's copy at PCIe speed (4 MiB at 50 GB/s: 80 us), and kEventWindow
// chunks stay queued, so the link never waits on it.
Status WaitForChunk(AgentCuda* cuda, size_t c) {
  auto query = FT_HOST_CUDA(cudaEventQuery);
  if (query == nullptr) return Status::Unavailable("cudaEventQuery not found");
  while (true) {
    const cudaError_t q = query(cuda->event(c));
    if (q != cudaErrorNotReady) return CudaStatus(q, "cudaEventQuery (a chunk's copy)");
    std::this_thread::sleep_for(kChunkPoll);
  }
}

// Copies every chunk; `sums` (may be null): checksums each as soon as it landed.
Status CopyChunks(SaveJob* job, AgentCuda* cuda, ChunkChecksummer* sums) {
  size_t n = job->manifest.chunk_count();
  ChunkCopier copier(*job, cuda);
  std::vector<bool> device_work(kEventWindow, false);
  size_t issued = 0;
  for (size_t c = 0; c < n; ++c) {
    // Keep kEventWindow chunks in flight: chunk `issued` reuses the event of chunk
    // issued - kEventWindow, which has been waited for.
    while (issued < n && issued < c + kEventWindow) {
      bool has_device_work = false;
      if (Status s = copier.Issue(issued, &has_device_work); !s.ok()) return s;
      device_work[issued % kEventWindow] = has_device_work;
      ++issued;
    }
    if (device_work[c % kEventWindow]) {
      if (Status s = WaitForChunk(cuda, c); !s.ok()) return s;
    }
    if (sums != nullptr) sums->Add(c);
  }
  return Status::Ok();
}

// After a failure: copies already issued must not land in the arena later, unnoticed.
void DrainStream(AgentCuda* cuda) {
  if (cuda->stream() == nullptr) return;
  if (auto sync = FT_HOST_CUDA(cudaStreamSynchronize)) (void)sync(cuda->stream());
}

// The end of every save, the one place a slot is committed: a copy whose every chunk landed and
// was checksummed (`copied` ok) is stamped and committed; otherwise, or when the commit fails, the
// slot is given up and the committed copy in the other slot stays what a restore finds.
Status CommitOrAbandon(SaveJob* job, const Status& copied) {
  if (!copied.ok()) {
    job->arena->AbandonWrite();
    return copied;
  }
  job->manifest.created_unix_ns = UnixNowNs();
  if (job->committing) job->committing();
  Status committed = job->arena->Commit(job->manifest);
  if (!committed.ok()) job->arena->AbandonWrite();
  return committed;
}

// A periodic snapshot (SaveJob::after): the copies wait on the device for the app's stream,
// all are issued before the app is let go, in at most kEventWindow groups of whole chunks, one
// event each; the checksums of a group's chunks start when its event is reached.
Status RunSnapshot(SaveJob* job, AgentCuda* cuda) {
  ckpt::Manifest& m = job->manifest;
  auto release = [&](const Status& s, cudaEvent_t copied) {
    if (job->issued) job->issued(s, copied);
    job->issued = nullptr;
  };
  auto landed = [&] {
    if (job->landed) job->landed();
    job->landed = nullptr;
  };
  Status prepared = cuda->Prepare(job->device);
  if (!prepared.ok()) {
    release(prepared, nullptr);
    landed();
    return prepared;
  }
  uint8_t* data = job->arena->BeginWrite();
  ZeroGaps(*job->buffers, m.data_bytes, data);
  m.chunk_checksums.assign(m.chunk_count(), 0);
  const size_t n = m.chunk_count();
  const size_t groups = std::min(n, kEventWindow);
  auto group_begin = [&](size_t g) { return g * n / groups; };
  std::vector<bool> device_work(groups, false);
  bool any_device_work = false;
  Status issued;
  if (job->device >= 0) {
    auto wait = FT_HOST_CUDA(cudaStreamWaitEvent);
    issued = wait == nullptr ? Status::Unavailable("cudaStreamWaitEvent not found")
                             : CudaStatus(wait(cuda->stream(), job->after, 0), "cudaStreamWaitEvent (the app's stream)");
  }
  auto record = FT_HOST_CUDA(cudaEventRecord);
  if (issued.ok() && record == nullptr) issued = Status::Unavailable("cudaEventRecord not found");
  ChunkCopier copier(*job, cuda);
  for (size_t g = 0; g < groups && issued.ok(); ++g) {
    for (size_t c = group_begin(g); c < group_begin(g + 1) && issued.ok(); ++c) {
      bool has_device_work = false;
      issued = copier.Issue(c, &has_device_work, /*record=*/false);
      if (has_device_work) device_work[g] = true;
    }
    if (issued.ok() && device_work[g]) {
      issued = CudaStatus(record(cuda->event(g), cuda->stream()), "cudaEventRecord");
      any_device_work = true;
    }
  }
  cudaEvent_t copied = nullptr;
  if (issued.ok() && any_device_work) {
    issued = CudaStatus(record(cuda->snapshot_event(), cuda->stream()), "cudaEventRecord");
    if (issued.ok()) copied = cuda->snapshot_event();
  }
  if (!issued.ok()) {
    // The app goes on with the error; copies already queued must not land in a slot given up.
    release(issued, nullptr);
    DrainStream(cuda);
    landed();
    job->arena->AbandonWrite();
    return issued;
  }
  release(issued, copied);
  Status done;
  if (any_device_work) {
    // The app's stream first: it may be far behind its host (or hung).
    auto query = FT_HOST_CUDA(cudaEventQuery);
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0; query != nullptr; ++round) {
      cudaError_t q = query(job->after);
      if (q != cudaErrorNotReady) {
        done = CudaStatus(q, "cudaEventQuery (the app's stream)");
        break;
      }
      if (job->waiting) {
        job->waiting(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      std::this_thread::sleep_for(std::chrono::microseconds(round < 100 ? 200 : 5000));
    }
  }
  Status copied_all = done;
  {
    ChunkChecksummer sums(&m, data, job->checksum_threads);
    for (size_t g = 0; g < groups && copied_all.ok(); ++g) {
      if (device_work[g]) copied_all = WaitForChunk(cuda, g);
      if (!copied_all.ok()) break;
      for (size_t c = group_begin(g); c < group_begin(g + 1); ++c) sums.Add(c);
    }
    if (!copied_all.ok()) DrainStream(cuda);
    landed();
    if (copied_all.ok()) {
      m.torn = job->torn ? job->torn() : false;
      sums.Finish();
    }
  }  // the helpers finish their chunks before the slot is given up (~ChunkChecksummer)
  return CommitOrAbandon(job, copied_all);
}

}  // namespace

Status RunSave(SaveJob* job, AgentCuda* cuda) {
  if (job->after != nullptr) return RunSnapshot(job, cuda);
  ckpt::Manifest& m = job->manifest;
  Status prepared = cuda->Prepare(job->device);
  if (!prepared.ok()) {
    if (job->copied) job->copied(prepared);
    return prepared;
  }
  // With two slots the copy goes to the slot the committed copy is not in: whatever happens to
  // this save, that copy stays until Commit replaces it with this one.
  uint8_t* data = job->arena->BeginWrite();
  ZeroGaps(*job->buffers, m.data_bytes, data);
  m.chunk_checksums.assign(m.chunk_count(), 0);
  Status copied;
  {
    ChunkChecksummer sums(&m, data, job->checksum_threads);
    copied = CopyChunks(job, cuda, job->periodic ? nullptr : &sums);
    if (!copied.ok()) DrainStream(cuda);
    // Before `copied`: a periodic save's app thread moves on to its next update right after.
    if (copied.ok()) m.torn = job->torn ? job->torn() : false;
    if (job->copied) job->copied(copied);
    if (copied.ok()) {
      if (job->periodic) {
        for (size_t c = 0; c < m.chunk_count(); ++c) sums.Add(c);
      }
      sums.Finish();
    }
  }  // the helpers finish their chunks before the slot is given up (~ChunkChecksummer)
  return CommitOrAbandon(job, copied);
}

}  // namespace ft::preload::agent

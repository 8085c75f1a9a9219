#include "preload/ckpt_save.h"

#include <time.h>

#include <algorithm>
#include <cstring>

#include "preload/ckpt_checksummer.h"
#include "preload/real.h"

namespace ft::preload::agent {

namespace {

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
  // when it has device work. Chunks must be issued in order.
  Status Issue(size_t c, bool* has_device_work) {
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
      auto copy = FT_REAL_CUDA(cudaMemcpyAsync);
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
    if (*has_device_work) {
      auto record = FT_REAL_CUDA(cudaEventRecord);
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

Status WaitForChunk(AgentCuda* cuda, size_t c) {
  auto sync = FT_REAL_CUDA(cudaEventSynchronize);
  if (sync == nullptr) return Status::Unavailable("cudaEventSynchronize not found");
  return CudaStatus(sync(cuda->event(c)), "cudaEventSynchronize (a chunk's copy)");
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
  if (auto sync = FT_REAL_CUDA(cudaStreamSynchronize)) (void)sync(cuda->stream());
}

}  // namespace

Status RunSave(SaveJob* job, AgentCuda* cuda) {
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
  if (!copied.ok()) {
    job->arena->AbandonWrite();
    return copied;
  }
  m.created_unix_ns = UnixNowNs();
  Status committed = job->arena->Commit(m);
  if (!committed.ok()) job->arena->AbandonWrite();
  return committed;
}

}  // namespace ft::preload::agent

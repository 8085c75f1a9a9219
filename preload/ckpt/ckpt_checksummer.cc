#include "preload/ckpt/ckpt_checksummer.h"

#include <algorithm>
#include <system_error>

#include "common/mutex.h"
#include "jitckpt/checksum.h"

namespace ft::preload::agent {

ChunkChecksummer::ChunkChecksummer(ckpt::Manifest* manifest, const uint8_t* data, int threads)
    : manifest_(manifest), data_(data), threads_(threads) {}

void ChunkChecksummer::StartHelpers() {
  started_ = true;
  if (threads_ <= 1) return;
  try {
    for (int i = 0; i < threads_; ++i) helpers_.emplace_back([this] { Help(); });
  } catch (const std::system_error&) {
    // Fewer helpers than asked (none, at worst: Add then checksums inline).
  }
}

ChunkChecksummer::~ChunkChecksummer() { Finish(); }

void ChunkChecksummer::Checksum(size_t c) {
  const uint64_t begin = manifest_->chunk_begin(c);
  manifest_->chunk_checksums[c] = ckpt::Checksum(data_ + begin, manifest_->chunk_end(c) - begin);
}

void ChunkChecksummer::Add(size_t c) {
  if (!started_) StartHelpers();
  if (helpers_.empty()) return Checksum(c);
  {
    MutexLock lock(&mu_);
    queue_.push_back(c);
  }
  cv_.NotifyOne();
}

void ChunkChecksummer::Help() {
  MutexLock lock(&mu_);
  while (true) {
    cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return !queue_.empty() || finishing_; });
    if (queue_.empty()) return;  // finishing, nothing left
    const size_t c = queue_.front();
    queue_.pop_front();
    lock.Unlock();
    Checksum(c);  // each chunk its own slot: no two threads write the same one
    lock.Lock();
  }
}

void ChunkChecksummer::Finish() {
  started_ = true;  // a chunk added later is checksummed inline
  {
    MutexLock lock(&mu_);
    finishing_ = true;
  }
  cv_.NotifyAll();
  for (std::thread& t : helpers_) t.join();  // each drains the queue before it returns
  helpers_.clear();
}

int ChecksumThreads(int64_t configured, unsigned hardware_threads, int local_ranks, uint64_t bytes) {
  if (configured > 0) return static_cast<int>(std::min<int64_t>(configured, 64));
  constexpr unsigned kAssumedRanksPerNode = 8;
  constexpr uint64_t kBytesPerHelper = 64ull << 20;
  const unsigned ranks = local_ranks > 0 ? static_cast<unsigned>(local_ranks) : kAssumedRanksPerNode;
  const uint64_t by_cores = hardware_threads / ranks / 2;
  const uint64_t by_bytes = bytes / kBytesPerHelper;
  return static_cast<int>(std::clamp<uint64_t>(std::min(by_cores, by_bytes), 1, 8));
}

}  // namespace ft::preload::agent

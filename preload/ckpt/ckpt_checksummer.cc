#include "preload/ckpt/ckpt_checksummer.h"

#include <algorithm>
#include <system_error>

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
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(c);
  }
  cv_.notify_one();
}

void ChunkChecksummer::Help() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return !queue_.empty() || finishing_; });
    if (queue_.empty()) return;  // finishing, nothing left
    const size_t c = queue_.front();
    queue_.pop_front();
    lock.unlock();
    Checksum(c);  // each chunk its own slot: no two threads write the same one
    lock.lock();
  }
}

void ChunkChecksummer::Finish() {
  started_ = true;  // a chunk added later is checksummed inline
  {
    std::lock_guard<std::mutex> lock(mu_);
    finishing_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : helpers_) t.join();  // each drains the queue before it returns
  helpers_.clear();
}

int ChecksumThreads(int64_t configured, unsigned hardware_threads) {
  if (configured > 0) return static_cast<int>(std::min<int64_t>(configured, 64));
  return static_cast<int>(std::clamp<unsigned>(hardware_threads / 16, 1, 4));
}

}  // namespace ft::preload::agent

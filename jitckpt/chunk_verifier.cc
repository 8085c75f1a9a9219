#include "jitckpt/chunk_verifier.h"

#include <cstring>
#include <system_error>

namespace ft::ckpt {

ChunkVerifier::ChunkVerifier(const Manifest& m, const uint8_t* data, int threads, uint8_t* copy_to)
    : m_(m), data_(data), copy_to_(copy_to), chunks_(m.chunk_count()),
      state_(new std::atomic<uint8_t>[m.chunk_count()]) {
  for (size_t i = 0; i < chunks_; ++i) state_[i].store(kPending, std::memory_order_relaxed);
  if (threads <= 1 || chunks_ < 2) return;
  try {
    for (int t = 0; t < threads; ++t) helpers_.emplace_back([this] { Help(); });
  } catch (const std::system_error&) {
    // Fewer helpers than asked (none, at worst: every chunk is then checked by Verifies).
  }
}

ChunkVerifier::~ChunkVerifier() {
  stopping_.store(true, std::memory_order_release);
  for (std::thread& t : helpers_) t.join();
}

bool ChunkVerifier::CheckChunk(size_t i) {
  const uint64_t begin = m_.chunk_begin(i), end = m_.chunk_end(i);
  if (copy_to_ == nullptr) return ChunkVerifies(m_, i, data_);
  std::memcpy(copy_to_ + begin, data_ + begin, end - begin);
  return ChunkVerifies(m_, i, copy_to_);
}

bool ChunkVerifier::Claim(size_t i) {
  uint8_t pending = kPending;
  return state_[i].compare_exchange_strong(pending, kBusy, std::memory_order_acq_rel);
}

void ChunkVerifier::Help() {
  while (!stopping_.load(std::memory_order_acquire)) {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= chunks_) return;
    if (!Claim(i)) continue;  // the caller got there first
    const bool good = CheckChunk(i);
    {
      MutexLock lock(&mu_);
      state_[i].store(good ? kGood : kBad, std::memory_order_release);
    }
    done_cv_.NotifyAll();
  }
}

bool ChunkVerifier::Verifies(size_t i) {
  if (i >= chunks_) return false;
  if (Claim(i)) {
    const bool good = CheckChunk(i);
    state_[i].store(good ? kGood : kBad, std::memory_order_release);
    return good;
  }
  if (state_[i].load(std::memory_order_acquire) == kBusy) {
    MutexLock lock(&mu_);
    done_cv_.Wait(&mu_, [&]() REQUIRES(mu_) { return state_[i].load(std::memory_order_acquire) != kBusy; });
  }
  return state_[i].load(std::memory_order_acquire) == kGood;
}

}  // namespace ft::ckpt

// libft.so internal: checksums a save's chunks on helper threads while the agent thread waits
// for the next device-to-host copies.
//
// On a GPU host the copy is the DMA engine's (tens of GB/s per GPU) and the CPU only
// checksums; one core's XXH3 over memory the DMA just wrote runs at about 10 GB/s, so a save on
// one thread is bound by its checksums. With `threads` helpers the chunks handed in are
// checksummed in parallel, each chunk by one thread into its own slot of the manifest. With
// threads <= 1, or when no helper thread can be started, Add checksums on the caller's thread
// (what a small host wants: its cores also run the copies). Fail-open: a save never fails for
// want of a thread. The helpers start at the first Add, so a periodic save, which checksums
// only after the copy the app waits for, starts no thread while the app waits.
//
// Threads: Add and Finish on one thread (the agent's).
#ifndef FT_PRELOAD_CKPT_CHECKSUMMER_H_
#define FT_PRELOAD_CKPT_CHECKSUMMER_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "jitckpt/manifest.h"

namespace ft::preload::agent {

class ChunkChecksummer {
 public:
  // Checksums chunks of `data` (the arena's data region) into manifest->chunk_checksums, which
  // must already hold one slot per chunk.
  ChunkChecksummer(ckpt::Manifest* manifest, const uint8_t* data, int threads);
  ~ChunkChecksummer();  // Finish()
  ChunkChecksummer(const ChunkChecksummer&) = delete;
  ChunkChecksummer& operator=(const ChunkChecksummer&) = delete;

  // Chunk c has landed: checksum it (now, or on a helper).
  void Add(size_t c);
  // Returns once every chunk added so far is checksummed; stops the helpers.
  void Finish();
  size_t helpers() const { return helpers_.size(); }  // running now

 private:
  void StartHelpers();
  void Checksum(size_t c);
  void Help();

  ckpt::Manifest* const manifest_;
  const uint8_t* const data_;
  const int threads_;
  bool started_ = false;  // the caller's thread only
  Mutex mu_;
  CondVar cv_;
  std::deque<size_t> queue_ GUARDED_BY(mu_);
  bool finishing_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> helpers_;
};

// How many helpers a save of `bytes` uses: FT_CKPT_CHECKSUM_THREADS when set (> 0); otherwise
// half of this rank's share of the host's hardware threads (the node's ranks save at once, and
// the other half stays with the app's own threads), at most 8 and at most one per 64 MiB of
// copy, at least 1. The share assumes 8 ranks on the node when the launcher does not say
// (local_ranks <= 0). On an H200 host's 16 threads with one rank: 8, where one checksum thread
// kept the save at 7 GB/s of the link's 55 (bench/RESULTS.md); on this repository's 2-vCPU
// development VM: 1, the other core being gpusim's copy engine.
int ChecksumThreads(int64_t configured, unsigned hardware_threads, int local_ranks, uint64_t bytes);

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_CHECKSUMMER_H_

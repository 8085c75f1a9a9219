// ft::ckpt::ChunkVerifier: a restore's chunk checks run ahead on helper threads, consumed in
// order. One XXH3 thread reads 7-16 GB/s, a fifth of a GPU host's host-to-device link: a
// restore verifying on the agent thread alone ran at 5.6-6.4 GB/s on the H200 (issue 32). The
// helpers take chunks in index order and verify them (copying each out of another arena first,
// when asked), the caller asks for chunk 0, 1, 2, ... and delivers each as soon as it verified,
// so the device copy of a chunk overlaps the checks of the chunks after it, as before.
#ifndef FT_JITCKPT_CHUNK_VERIFIER_H_
#define FT_JITCKPT_CHUNK_VERIFIER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "jitckpt/manifest.h"

namespace ft::ckpt {

class ChunkVerifier {
 public:
  // Checks the chunks of `m` at `data` (copy_to null), or copies each chunk from `data` to
  // `copy_to` at its offset and checks the copy there. threads <= 1: each chunk is copied and
  // checked when Verifies asks for it, on the caller's thread. `m`, `data` and `copy_to` outlive
  // this object.
  ChunkVerifier(const Manifest& m, const uint8_t* data, int threads, uint8_t* copy_to = nullptr);
  ~ChunkVerifier();  // stops the helpers (chunks not begun are left) and joins them
  ChunkVerifier(const ChunkVerifier&) = delete;
  ChunkVerifier& operator=(const ChunkVerifier&) = delete;

  // Whether chunk i (copied, when asked) matches its checksum; waits for it. Callers ask in
  // order; a chunk asked for before a helper took it is checked on the caller's thread.
  bool Verifies(size_t i);

 private:
  enum : uint8_t { kPending = 0, kBusy = 1, kGood = 2, kBad = 3 };
  bool CheckChunk(size_t i);  // copy (when asked) and checksum: true when it matches
  void Help();
  bool Claim(size_t i);       // kPending -> kBusy: the caller that wins checks it

  const Manifest& m_;
  const uint8_t* data_;
  uint8_t* copy_to_;
  const size_t chunks_;
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
  std::atomic<size_t> next_{0};      // the next chunk a helper takes
  std::atomic<bool> stopping_{false};
  Mutex mu_;
  CondVar done_cv_;  // a chunk left kBusy
  std::vector<std::thread> helpers_;
};

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_CHUNK_VERIFIER_H_

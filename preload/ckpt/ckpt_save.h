// libft.so internal: the save engine of the checkpoint agent — copies the registered buffers
// into the arena's data region in chunks, checksums each chunk as soon as it has landed, and
// commits the manifest last (jitckpt/arena.h's protocol). Agent thread only.
#ifndef FT_PRELOAD_CKPT_SAVE_H_
#define FT_PRELOAD_CKPT_SAVE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "jitckpt/arena.h"
#include "jitckpt/manifest.h"
#include "preload/ckpt/ckpt_cuda.h"

namespace ft::preload::agent {

// One registered buffer.
struct Registered {
  enum class Where { kHost, kDevice, kManaged };
  std::string name;
  uint8_t* ptr = nullptr;
  uint64_t bytes = 0;
  Where where = Where::kHost;
  int device = -1;      // of device and managed memory
  uint64_t offset = 0;  // in the data region (PlanLayout), set at ft_register_end
};

struct SaveJob {
  const std::vector<Registered>* buffers = nullptr;  // in offset order
  // Identity, layout, chunk size, data_bytes and step filled in; RunSave sets the chunk
  // checksums, the torn flag and the time.
  ckpt::Manifest manifest;
  ckpt::Arena* arena = nullptr;
  int device = -1;  // of the device buffers; -1: host buffers only
  // Periodic save (the app waits in ft_step_done): every chunk is copied first, `copied` is
  // called, then the checksums are computed. Otherwise each chunk is checksummed as soon as
  // it lands, overlapping the copies still in flight.
  bool periodic = false;
  std::function<void(const Status&)> copied;  // once the device-to-host copy ended (or failed)
  std::function<bool()> torn;                 // asked once every chunk has landed
  int checksum_threads = 1;  // helpers for the chunk checksums (preload/ckpt/ckpt_checksummer.h)
  // A periodic snapshot that never blocks the host (docs/checkpoints.md, "Snapshots that never
  // block"): non-null, the copies are ordered after this event (recorded on the app's stream
  // at ft_step_done) by cudaStreamWaitEvent on the agent's stream, every copy is issued at once
  // (host buffers are copied before), then `issued` is called with the event recorded after
  // the last copy (null when there is no device work) and the save goes on: it waits for the
  // copies, checksums, commits. `copied` is not called.
  cudaEvent_t after = nullptr;
  std::function<void(const Status&, cudaEvent_t copied)> issued;
  // Snapshot: asked every few milliseconds while `after` is not reached (the app's stream has
  // not got there: slow, or hung), with the time waited so far.
  std::function<void(double seconds)> waiting;
  // Snapshot: every copy has landed (or, after a failure, none is left in flight). Before the
  // checksums.
  std::function<void()> landed;
  // Every save: called right before the commit (the copies and checksums are done).
  std::function<void()> committing;
};

// Copies, checksums and commits. On error (a CUDA call failed) the arena stays uncommitted
// (BeginWrite was called) and nothing of the save is published.
Status RunSave(SaveJob* job, AgentCuda* cuda);

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_SAVE_H_

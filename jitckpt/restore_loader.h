// ft::ckpt::LoadForRestore: the host half of ft_restore, with no CUDA: finds a verified copy
// of the planned step for this rank on this node and brings it into the rank's own arena,
// verified chunk by chunk. The agent then copies the arena's buffers to the device.
//
// Sources, fastest first: the rank's own arena (already holding the step: verified in place,
// nothing copied), the copy ftworker prefetched for it from another node (a plan source
// <rank>:<this node>:prefetched: the arena file Arena::PrefetchPathFor, opened read-only), a
// same-node peer's arena (plan sources on this node), the local directory,
// the remote directory (plan sources whose copy is in that tier). A source is used only when
// its manifest's step and content digest equal the plan's and it is not torn; a source that
// fails (absent, overwritten while read, a chunk that does not verify, unreadable) is logged
// with why and the next one is tried. All or nothing: a copy is committed into the own arena
// only once every chunk verified; on error the own arena keeps its committed copy when it has
// two slots (with one, a failed copy into it leaves it empty).
#ifndef FT_JITCKPT_RESTORE_LOADER_H_
#define FT_JITCKPT_RESTORE_LOADER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "jitckpt/arena.h"
#include "jitckpt/manifest.h"
#include "jitckpt/node_plan.h"

namespace ft::ckpt {

// Where a restore reads a copy from, fastest first (the order sources are tried in).
enum class SourceKind : uint8_t {
  kOwnArena,    // the rank's own arena, holding the step already: verified in place
  kPrefetched,  // the copy this node's worker prefetched for the rank from another node
  kBuddyCopy,   // a buddy copy this node's worker holds (of the rank, or of a replica of its shard)
  kPeerArena,   // a same-node DP replica's arena
  kLocalDir,    // the node-local directory
  kRemoteDir,   // the shared remote directory
};

// Why a source was skipped: one code per kind of failure. The line beside it says the details
// (which file, which chunk, which digests) for people, and may be reworded; programs and tests
// compare the code.
enum class SkipReason : uint8_t {
  kAbsent,            // nothing there: no such arena or file
  kUnreadable,        // there, but refused or failed to read (not ours, not a regular file, I/O error)
  kNoCommittedCopy,   // an arena with no committed copy (never saved, or one slot being rewritten)
  kOtherStep,         // it holds another step than the plan restores
  kTorn,              // saved while the state was being updated: never restored
  kDigestMismatch,    // its content digest differs from the verified one (an odd replica)
  kTruncated,         // its data file is not the size its manifest says
  kChunkMismatch,     // a chunk does not match its checksum
  kOverwritten,       // a new save overwrote it while it was read
  kChunkSizeChanged,  // its manifest does not fit this run's arena (saved with another FT_CKPT_CHUNK)
};

const char* SourceKindName(SourceKind kind);
const char* SkipReasonName(SkipReason reason);

// One source that was tried and failed.
struct SkippedSource {
  SourceKind kind = SourceKind::kOwnArena;
  int rank = -1;  // the rank its plan source names: the restoring rank's own, or a replica's
  SkipReason reason = SkipReason::kAbsent;
  std::string line;  // "<source>: <why>", as logged
};

struct RestoreResult {
  int64_t step = -1;
  SourceKind source_kind = SourceKind::kOwnArena;
  int source_rank = -1;          // the rank its plan source names (a prefetched copy: this rank)
  std::string source;            // for people: "own arena", "arena of rank 4", "remote dir (copy of rank 11)"
  Manifest manifest;             // the restored copy's manifest (now committed in `own`)
  double seconds = 0;
  std::vector<SkippedSource> skipped;  // the sources tried before, in order
};

// Where verified chunks go as they verify (the agent: a host-to-device copy into the registered
// buffers), so the copy to the device overlaps the verification of the chunks after it instead
// of waiting for the whole copy. Every source of a plan holds the same bytes (one content
// digest), so the chunks a failed source delivered are right, and the next source delivers
// every chunk again.
class RestoreSink {
 public:
  virtual ~RestoreSink() = default;
  // Before a source's first chunk (the second source on): the memory a failed source's chunks
  // were read from may be written next, so what reads it must be done.
  virtual void SourceBegins() = 0;
  // Chunk `chunk` of the copy `m` verified: its bytes are at data + m.chunk_begin(chunk) and
  // stay there until SourceBegins or LoadForRestore returns.
  virtual void Verified(const Manifest& m, size_t chunk, const uint8_t* data) = 0;
};

// `registered`: this rank's buffers as laid out by PlanLayout. NotFound when the plan has no
// step (or no line for this rank); InvalidArgument (LayoutMatches' words) when the saved
// layout differs; Corrupt when every source failed (RestoreResult::skipped says why, each with
// its SkipReason).
// `verify_threads`: helper threads that check (and, from a peer's or the prefetched arena, copy)
// an arena source's chunks ahead of their delivery (ChunkVerifier); <= 1, the caller's thread
// alone. Chunks reach the sink in order either way.
Status LoadForRestore(const NodePlan& plan, int rank, const std::string& node,
                      const std::vector<BufferEntry>& registered, Arena* own, RestoreResult* result,
                      RestoreSink* sink = nullptr, int verify_threads = 1);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_RESTORE_LOADER_H_

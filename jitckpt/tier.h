// ft::ckpt tiers: committed copies on disk, written by ftworker, read by ft_restore.
//
//   <dir>/<job>/step-<step, 12 digits>/rank-<rank, 6 digits>.data       the data region
//   <dir>/<job>/step-<step, 12 digits>/rank-<rank, 6 digits>.manifest   committed last
//   ...*.tmp.<host>.<pid>                                                being written
//
// A copy exists only once its manifest is in place (renamed last, after the data file was
// fsynced and renamed, then the directory fsynced); anything else in the tree is uncommitted:
// ignored by readers and removed by CleanUncommitted at the next worker start.
//
// Local tier (FT_CKPT_DIR, a node-local disk): O_DIRECT writes of whole 4 KiB-aligned blocks
// from the arena's 2 MiB-aligned data region (falls back to buffered I/O, said once in the
// log, where the file system refuses O_DIRECT, e.g. tmpfs). Remote tier (FT_CKPT_REMOTE_DIR,
// a shared file system): buffered writes in 4 MiB chunks. Both: temp file, fsync, rename.
// Thread-compatible: one writer per (dir, job) — the worker's persist thread.
//
// Trust: <dir> itself is the operator's setting (symlinks allowed). Below it, <dir>/<job> and
// every step directory must be directories of this user, never symlinks: a writer refuses
// them (IoError naming the directory and its owner), readers refuse them (Corrupt), listings
// skip them. Files are opened with OpenTrusted (jitckpt/file_ops.h): a FIFO, a symlink or a
// file of another user is refused at once, never waited on.
//
// Every function has a form that takes a FileOps: the system calls it writes, reads, lists,
// renames and fsyncs with (jitckpt/tests/fault_file_ops.h cuts the power through it).
#ifndef FT_JITCKPT_TIER_H_
#define FT_JITCKPT_TIER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "jitckpt/manifest.h"

namespace ft::ckpt {

class FileOps;

enum class TierKind { kLocal, kRemote };
const char* TierName(TierKind kind);  // "local", "remote"

struct CopyId {
  int64_t step = -1;
  int rank = -1;
  bool operator==(const CopyId&) const = default;
  auto operator<=>(const CopyId&) const = default;
};

std::string StepDir(std::string_view dir, std::string_view job, int64_t step);
std::string DataPath(std::string_view dir, std::string_view job, CopyId id);
std::string ManifestPath(std::string_view dir, std::string_view job, CopyId id);

struct PersistStats {
  uint64_t bytes = 0;
  double seconds = 0;
  bool direct_io = false;  // local tier: O_DIRECT was used
};

// Writes one committed copy: `data` is the data region (m.data_bytes bytes, 2 MiB-aligned
// when it comes from an arena). `still_valid` is asked after the data is written and before
// the manifest is committed (the arena's StillCommitted): false abandons the copy (Aborted
// is reported as NotReady) and removes the temp files. IoError (with errno's words, e.g. "No
// space left on device") leaves no partial copy behind.
Status PersistCopy(TierKind kind, std::string_view dir, const Manifest& m, const uint8_t* data,
                   const std::function<bool()>& still_valid, PersistStats* stats);
// The same through `ops` (jitckpt/file_ops.h), the seam tests use to fail a write with ENOSPC.
Status PersistCopy(FileOps& ops, TierKind kind, std::string_view dir, const Manifest& m,
                   const uint8_t* data, const std::function<bool()>& still_valid,
                   PersistStats* stats);

// Reads the copy's manifest (ParseManifest's errors; NotFound when absent; Corrupt for a file
// or directory that is not trusted, and for a manifest of another job, step or rank).
Status ReadManifest(std::string_view dir, std::string_view job, CopyId id, Manifest* m);
Status ReadManifest(FileOps& ops, std::string_view dir, std::string_view job, CopyId id, Manifest* m);
// Reads its data into `dest` (capacity >= m.data_bytes), verifying every chunk as it lands:
// Corrupt naming the first bad chunk and the file; IoError for a short or failed read.
Status ReadData(std::string_view dir, std::string_view job, const Manifest& m, uint8_t* dest,
                uint64_t dest_capacity);
Status ReadData(FileOps& ops, std::string_view dir, std::string_view job, const Manifest& m, uint8_t* dest,
                uint64_t dest_capacity);

// Reads bytes [offset, offset + len) of the copy's data into dest[0, len), verifying every
// chunk in the range: the range must begin at a chunk boundary and end at one or at
// m.data_bytes (InvalidArgument otherwise). The prefetcher's last resort for a chunk no peer
// delivered. Corrupt naming the chunk and the file; NotFound without a data file; IoError for
// a short or failed read.
Status ReadDataRange(std::string_view dir, std::string_view job, const Manifest& m, uint64_t offset,
                     uint64_t len, uint8_t* dest);
Status ReadDataRange(FileOps& ops, std::string_view dir, std::string_view job, const Manifest& m,
                     uint64_t offset, uint64_t len, uint8_t* dest);

// Committed copies of `job` in `dir`, sorted: a manifest and its data file, both regular files
// of this user. None when the job has no directory; Corrupt when its directory is not trusted
// (the first form then returns none).
std::vector<CopyId> ListCommitted(std::string_view dir, std::string_view job);
Status ListCommitted(FileOps& ops, std::string_view dir, std::string_view job, std::vector<CopyId>* out);
// What retention keeps in one tier, and whose copies it may remove. A step is *complete* in the
// tier when every expected rank has a committed copy of it there. Kept, whatever keep_steps
// says: the newest keep_steps complete steps, every step newer than the oldest of those (a step
// still being persisted, by this node or another), and the steps in keep_also (the planned
// step, the newest verified one). With fewer than keep_steps complete steps nothing goes: a
// step that is not complete may still be the only good copy of some rank's shard.
struct RetentionRule {
  int keep_steps = 2;               // FT_CKPT_KEEP, >= 1
  std::vector<int> expected_ranks;  // the remote tier: every rank of the job; the local: the node's
  std::vector<int> own_ranks;       // whose copies this caller may remove: its node's ranks only
  std::vector<int64_t> keep_also;   // kept whatever keep_steps says
};

struct RetentionResult {
  std::vector<CopyId> removed;          // copies removed, sorted
  std::vector<std::string> left;        // copies due to go but left: why, naming the file
  std::vector<int64_t> complete_steps;  // the tier's complete steps before retention, ascending
};

// Removes what `rule` lets go of `job`'s copies in `dir`: per step older than the newest
// keep_steps complete steps and not in keep_also, the copies of own_ranks — each only after
// its manifest was read and names this job (a copy of another job is left, said in
// result->left), its manifest first so that it stops being a copy before its data goes. A
// step directory left empty is removed. Another node's ranks' copies are never touched: their
// worker removes them by the same rule. InvalidArgument for keep_steps < 1, with nothing
// removed; Corrupt when the job's directory is not trusted.
Status Retain(std::string_view dir, std::string_view job, const RetentionRule& rule, RetentionResult* result);
Status Retain(FileOps& ops, std::string_view dir, std::string_view job, const RetentionRule& rule,
              RetentionResult* result);
// Removes temp files and data files without a manifest (a worker killed mid-persist); how
// many files were removed goes to *removed. The remote directory is shared by every node's
// worker, so what another writer may still be writing stays: temps of a live process of this
// host, temps of another host modified in the last 10 minutes, and a data file whose manifest
// is such a temp.
Status CleanUncommitted(std::string_view dir, std::string_view job, int* removed);
Status CleanUncommitted(FileOps& ops, std::string_view dir, std::string_view job, int* removed);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_TIER_H_

// ft::ckpt tier durability: how a committed copy reaches a tier's directory so that a crash or
// power cut at any moment leaves either the whole copy or none, and how what such a crash left
// behind is cleaned up.
//
// The protocol, in order: the step directory exists and its parent is fsynced; the data is
// written to <data path>.tmp.<host>.<pid> and fsynced; the manifest likewise to its temp;
// still_valid is asked; an earlier manifest of the same id is removed (directory fsynced), so no
// reader ever pairs an old manifest with new data; the data temp is renamed into place and the
// directory fsynced; the manifest temp is renamed into place and the directory fsynced. A copy
// exists only once its manifest is in place; anything else in the tree is uncommitted: ignored
// by readers (jitckpt/tier_list.h) and removed by CleanUncommitted at the next worker start.
//
// Local tier (FT_CKPT_DIR, a node-local disk): O_DIRECT writes of whole 4 KiB-aligned blocks
// from the arena's 2 MiB-aligned data region (falls back to buffered I/O, said once in the
// log, where the file system refuses O_DIRECT, e.g. tmpfs). Remote tier (FT_CKPT_REMOTE_DIR,
// a shared file system): buffered writes in 4 MiB chunks, streamed out of the page cache.
// Thread-compatible: one writer per (dir, job) — the worker's persist thread.
//
// jitckpt/tests/fault_file_ops.h tests the protocol by cutting the power through the FileOps
// forms: whatever was not fsynced is dropped, renames not made durable are undone.
#ifndef FT_JITCKPT_TIER_PERSIST_H_
#define FT_JITCKPT_TIER_PERSIST_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "common/status.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tier_paths.h"

namespace ft::ckpt {

class FileOps;

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

// Removes temp files and data files without a manifest (a worker killed mid-persist); how
// many files were removed goes to *removed. The remote directory is shared by every node's
// worker, so what another writer may still be writing stays: temps of a live process of this
// host, temps of another host modified in the last 10 minutes, and a data file whose manifest
// is such a temp.
Status CleanUncommitted(std::string_view dir, std::string_view job, int* removed);
Status CleanUncommitted(FileOps& ops, std::string_view dir, std::string_view job, int* removed);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_TIER_PERSIST_H_

// ft::ckpt tiers: committed copies on disk, written by ftworker, read by ft_restore. This header
// gathers the tier's parts; each owns one question and says its own rules:
//
//   jitckpt/tier_paths.h    naming: where a copy of (job, step, rank) lives, temp file names
//   jitckpt/tier_persist.h  durability: write, fsync, rename, manifest last; CleanUncommitted
//   jitckpt/tier_read.h     reading a copy's manifest and data, every chunk verified
//   jitckpt/tier_list.h     listing: which committed copies a directory holds
//   jitckpt/tier_retain.h   retention: which copies go
//
// (jitckpt/tier_files.h holds what they share: the trust rule for the tree below a tier's
// directory.) A copy exists only once its manifest is in place; anything else is uncommitted.
// Every function has a form that takes a FileOps: the system calls it writes, reads, lists,
// renames and fsyncs with (jitckpt/tests/fault_file_ops.h cuts the power through it).
#ifndef FT_JITCKPT_TIER_H_
#define FT_JITCKPT_TIER_H_

#include "jitckpt/tier_list.h"
#include "jitckpt/tier_paths.h"
#include "jitckpt/tier_persist.h"
#include "jitckpt/tier_read.h"
#include "jitckpt/tier_retain.h"

#endif  // FT_JITCKPT_TIER_H_

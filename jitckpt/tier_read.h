// ft::ckpt tier reads: a committed copy's manifest and its data, verified as they land. Used by
// ft_restore (restore_loader), the worker's keeper, copy server and prefetcher. Thread-safe (no
// state). Files and directories are trusted only as jitckpt/tier_files.h says: a FIFO at a
// path is refused at once, never waited on.
#ifndef FT_JITCKPT_TIER_READ_H_
#define FT_JITCKPT_TIER_READ_H_

#include <cstdint>
#include <functional>
#include <string_view>

#include "common/status.h"
#include "jitckpt/manifest.h"
#include "jitckpt/tier_paths.h"

namespace ft::ckpt {

class FileOps;

// Reads the copy's manifest (ParseManifest's errors; NotFound when absent; Corrupt for a file
// or directory that is not trusted, and for a manifest of another job, step or rank).
Status ReadManifest(std::string_view dir, std::string_view job, CopyId id, Manifest* m);
Status ReadManifest(FileOps& ops, std::string_view dir, std::string_view job, CopyId id, Manifest* m);
// Reads its data into `dest` (capacity >= m.data_bytes), verifying every chunk as it lands:
// Corrupt naming the first bad chunk and the file; IoError for a short or failed read.
// `verified` (may be empty) is called with each chunk's index once it verified.
Status ReadData(std::string_view dir, std::string_view job, const Manifest& m, uint8_t* dest,
                uint64_t dest_capacity, const std::function<void(size_t)>& verified = {});
Status ReadData(FileOps& ops, std::string_view dir, std::string_view job, const Manifest& m, uint8_t* dest,
                uint64_t dest_capacity, const std::function<void(size_t)>& verified = {});

// Reads bytes [offset, offset + len) of the copy's data into dest[0, len), verifying every
// chunk in the range: the range must begin at a chunk boundary and end at one or at
// m.data_bytes (InvalidArgument otherwise). The prefetcher's last resort for a chunk no peer
// delivered. Corrupt naming the chunk and the file; NotFound without a data file; IoError for
// a short or failed read.
Status ReadDataRange(std::string_view dir, std::string_view job, const Manifest& m, uint64_t offset,
                     uint64_t len, uint8_t* dest);
Status ReadDataRange(FileOps& ops, std::string_view dir, std::string_view job, const Manifest& m,
                     uint64_t offset, uint64_t len, uint8_t* dest);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_TIER_READ_H_

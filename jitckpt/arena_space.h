// Internal to the host arena (arena.cc): room for an arena file in its directory, and its
// writable mapping. The data regions may be reserved later than the header (Arena::PrepareData):
// the free space is checked for the whole file at open either way, so a directory too small is
// an error at registration, and posix_fallocate then takes the blocks before any save writes.
#ifndef FT_JITCKPT_ARENA_SPACE_H_
#define FT_JITCKPT_ARENA_SPACE_H_

#include <cstdint>
#include <string>

#include "common/status.h"

namespace ft::ckpt::arena_space {

// The directory an arena file lives in ("." for a bare name).
std::string DirOf(const std::string& path);

// "1.5 GiB", "3.0 MiB", "512 bytes": sizes in messages a person reads.
std::string Human(uint64_t bytes);

// Sizes `fd` to file_bytes, checks that `dir` can hold every block of it not allocated yet, and
// reserves [0, reserve_end) with posix_fallocate. IoError naming the directory and the bytes
// missing when it does not fit.
Status Reserve(int fd, const std::string& dir, const std::string& path, uint64_t file_bytes,
               uint64_t reserve_end);
// Reserves [begin, end) of `fd`: the rest of a file Reserve sized.
Status ReserveRange(int fd, const std::string& dir, const std::string& path, uint64_t begin, uint64_t end);

// Maps `fd` shared and writable, huge pages advised from data_offset on (before any page is
// mapped, or the advice changes nothing). Pages are not populated here.
Status MapWritable(int fd, const std::string& path, uint64_t file_bytes, uint64_t data_offset, uint8_t** base);

}  // namespace ft::ckpt::arena_space

#endif  // FT_JITCKPT_ARENA_SPACE_H_

// The ids libft.so puts into kApiError records (shm/records.h ApiSymbolId: FNV-1a 64 of the
// symbol's name), one per CudaSym / NcclSym, computed at compile time from the same .def lists
// that number the symbols. An id depends on the name only, so adding, removing or reordering a
// .def line renames no error between builds; the worker maps ids back to names through the
// same lists (ftworker/monitor/op_names.cc).
#ifndef FT_PRELOAD_API_SYMBOL_IDS_H_
#define FT_PRELOAD_API_SYMBOL_IDS_H_

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "preload/real.h"
#include "shm/records.h"

namespace ft::preload {
namespace detail {

inline constexpr uint64_t kCudaSymIds[] = {
#define FT_CUDA(ret, name, params, args, kind) shm::ApiSymbolId(#name),
#define FT_CUDA_REAL(ret, name, params) shm::ApiSymbolId(#name),
#include "shm/cudart.def"
#undef FT_CUDA
#undef FT_CUDA_REAL
};

inline constexpr uint64_t kNcclSymIds[] = {
#define FT_NCCL(ret, name, params, args, kind) shm::ApiSymbolId(#name),
#include "shm/nccl.def"
#undef FT_NCCL
};

template <size_t N>
constexpr bool AllDistinct(const uint64_t (&ids)[N]) {
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = i + 1; j < N; ++j) {
      if (ids[i] == ids[j]) return false;
    }
  }
  return true;
}

static_assert(std::size(kCudaSymIds) == static_cast<size_t>(CudaSym::kCount));
static_assert(std::size(kNcclSymIds) == static_cast<size_t>(NcclSym::kCount));
// A reader could not tell two such symbols apart: rename one or salt the id (a new record
// version).
static_assert(AllDistinct(kCudaSymIds), "two cudart.def symbols share an API symbol id");
static_assert(AllDistinct(kNcclSymIds), "two nccl.def symbols share an API symbol id");

}  // namespace detail

constexpr uint64_t ApiSymbolIdOf(CudaSym sym) {
  return detail::kCudaSymIds[static_cast<size_t>(sym)];
}
constexpr uint64_t ApiSymbolIdOf(NcclSym sym) {
  return detail::kNcclSymIds[static_cast<size_t>(sym)];
}

}  // namespace ft::preload

#endif  // FT_PRELOAD_API_SYMBOL_IDS_H_

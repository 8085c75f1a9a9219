#include "ftworker/monitor/op_names.h"

#include <fmt/format.h>

#include <array>
#include <span>

#include "common/hex.h"
#include "shm/records.h"

namespace ft::worker {
namespace {

// An error record names its symbol by id (shm::ApiSymbolId of the name). The .def lists
// libft.so is built from expand to (id, name) pairs; the parameter lists are dropped unread,
// so no CUDA or NCCL header is needed. Their order does not matter: an id depends on the name
// only, so a libft.so built from a longer or reordered list is still named right.
struct ApiSymbol {
  uint64_t id;
  const char* name;
};

constexpr ApiSymbol kCudartSymbols[] = {
#define FT_CUDA(ret, name, params, args, kind) {shm::ApiSymbolId(#name), #name},
#define FT_CUDA_REAL(ret, name, params) {shm::ApiSymbolId(#name), #name},
#include "shm/cudart.def"
#undef FT_CUDA
#undef FT_CUDA_REAL
};

constexpr ApiSymbol kNcclSymbols[] = {
#define FT_NCCL(ret, name, params, args, kind) {shm::ApiSymbolId(#name), #name},
#include "shm/nccl.def"
#undef FT_NCCL
};

}  // namespace

const char* ApiLibraryName(uint64_t library) {
  switch (static_cast<shm::ApiLibrary>(library)) {
    case shm::ApiLibrary::kCudart: return "cudart";
    case shm::ApiLibrary::kNccl: return "nccl";
  }
  return "unknown";
}

std::string ApiCallName(uint64_t library, uint64_t symbol_id) {
  std::span<const ApiSymbol> symbols;
  if (library == static_cast<uint64_t>(shm::ApiLibrary::kCudart)) symbols = kCudartSymbols;
  if (library == static_cast<uint64_t>(shm::ApiLibrary::kNccl)) symbols = kNcclSymbols;
  for (const ApiSymbol& s : symbols) {
    if (s.id == symbol_id) return s.name;
  }
  return "#" + Hex64(symbol_id);
}

std::string ApiCallNameV1(uint64_t index) {
  return fmt::format("#{} (symbol index of an older libft.so)", index);
}

std::string CommHex(uint64_t comm_id) { return Hex64(comm_id); }

}  // namespace ft::worker

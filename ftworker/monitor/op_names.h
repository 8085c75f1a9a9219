// Names the worker puts into Redis values for things libft.so writes as numbers: API symbols of
// error records (shm::ApiSymbolId of a name in shm/cudart.def or shm/nccl.def) and
// communicator ids. (Op kinds need no mapping: proto::OpKind is shm::OpKind, and
// shm::OpKindOfRecord reads a record's.) Pure functions; any thread.
#ifndef FT_FTWORKER_OP_NAMES_H_
#define FT_FTWORKER_OP_NAMES_H_

#include <cstdint>
#include <string>

namespace ft::worker {

// "cudart" (library 1), "nccl" (2), else "unknown".
const char* ApiLibraryName(uint64_t library);
// The symbol of the library's .def list whose shm::ApiSymbolId is `symbol_id` ("cudaMalloc",
// "ncclAllReduce"), or "#<id in 16 hex digits>" for one this build's list lacks (a newer
// libft.so). Record version 2 and later; version 1 records carry a .def index instead, which
// no reader can map (ApiCallNameV1).
std::string ApiCallName(uint64_t library, uint64_t symbol_id);
// A version-1 record's symbol: "#<index> (symbol index of an older libft.so)".
std::string ApiCallNameV1(uint64_t index);

// 16 lowercase hex digits, as Redis values carry communicator ids.
std::string CommHex(uint64_t comm_id);

}  // namespace ft::worker

#endif  // FT_FTWORKER_OP_NAMES_H_

// Distributes rank 0's ncclUniqueId to the other ranks over one TCP exchange, the way
// torch.distributed does through its store: rank 0 listens on addr:port (that address only,
// never the wildcard), every other rank connects (retrying for up to 60 s while rank 0 starts)
// and receives the blob. Plain C++ and sockets; knows nothing of NCCL.
#ifndef TRAINSIM_BOOTSTRAP_H_
#define TRAINSIM_BOOTSTRAP_H_

#include <cstddef>
#include <string>

namespace trainsim {

// rank 0: serves blob[len] to world-1 peers and returns once all have it.
// rank > 0: fills blob[len] from rank 0.
// Returns false with *error (naming addr:port and what to check) on failure.
bool ExchangeBlob(const std::string& addr, int port, int rank, int world, void* blob, size_t len,
                  std::string* error);

}  // namespace trainsim

#endif  // TRAINSIM_BOOTSTRAP_H_

// libft.so internal: the registry of communicators (handle -> CommInfo, under comms_lock), their
// ids and their in-flight table slots. Called by app threads from the NCCL hooks.
#ifndef FT_PRELOAD_COMM_REGISTRY_H_
#define FT_PRELOAD_COMM_REGISTRY_H_

#include <nccl.h>

#include <cstdint>

#include "preload/runtime_state.h"
#include "shm/records.h"

namespace ft::preload::internal {

CommInfo* Register(ncclComm_t handle, uint64_t id, int rank, int size, CommOrigin origin,
                   uint64_t parent_id, uint32_t ordinal, int color);
CommInfo* Lookup(ncclComm_t handle);
// The live communicator of `handle`, or nullptr (no lock, no registration).
CommInfo* FindComm(ncclComm_t handle);
// Takes `handle` out of the live communicators; its CommInfo (returned) stays.
CommInfo* UnregisterComm(ncclComm_t handle);
void FillIdentity(ncclComm_t handle, CommInfo* info);
uint32_t P2PSlot(CommInfo* info);

}  // namespace ft::preload::internal

#endif  // FT_PRELOAD_COMM_REGISTRY_H_

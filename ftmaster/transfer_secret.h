// The job's peer-transfer secret (ft:{J}:transfer:secret, docs/redis-schema.md "The transfer
// secret"): 32 random bytes, as 64 lowercase hex characters, that workers use to authenticate
// each other before one serves a checkpoint copy to another (rdma/, challenge and response).
// The leading master creates it when absent; it is never printed, logged or put in argv.
#ifndef FT_FTMASTER_TRANSFER_SECRET_H_
#define FT_FTMASTER_TRANSFER_SECRET_H_

#include <cstddef>
#include <string>

#include "common/status.h"

namespace ft::master {

inline constexpr size_t kTransferSecretBytes = 32;

// A fresh secret from getrandom(2) (the kernel's CSPRNG, blocking only until it is seeded at
// boot). *hex is set only on success: 2 * kTransferSecretBytes lowercase hex characters.
Status NewTransferSecret(std::string* hex);

// True for a value NewTransferSecret could have made (64 lowercase hex characters).
bool IsTransferSecret(const std::string& value);

}  // namespace ft::master

#endif  // FT_FTMASTER_TRANSFER_SECRET_H_

// Challenge and response between two holders of the job's transfer secret (HMAC-SHA256). Each
// side sends a fresh random nonce; each proves the secret with a MAC over both nonces and a
// context string naming its role, so neither side's proof can be replayed (new nonces every
// connection) or reflected (the roles differ). The client checks the server's proof too: a
// process that merely listens on a peer's port cannot feed a client bytes.
#ifndef FT_TRANSFER_ENGINE_AUTH_H_
#define FT_TRANSFER_ENGINE_AUTH_H_

#include <array>
#include <string_view>

#include "common/status.h"
#include "transfer_engine/wire.h"

namespace ft::rdma::auth {

enum class Role { kClient, kServer };

// A nonce from the OS's cryptographic generator.
Status RandomNonce(wire::Nonce* out);
// HMAC-SHA256(secret, "ft-transfer/1 <role>" || server_nonce || client_nonce).
wire::Mac ComputeMac(std::string_view secret, Role role, const wire::Nonce& server_nonce,
                     const wire::Nonce& client_nonce);
// Constant-time comparison against the expected proof.
bool VerifyMac(std::string_view secret, Role role, const wire::Nonce& server_nonce,
               const wire::Nonce& client_nonce, const wire::Mac& mac);

// The job's transfer secret is 64 hex digits (32 random bytes, as ftmaster makes it). Server
// and client both refuse anything else (InvalidArgument, the value itself never quoted), so a
// truncated or mangled value fails where it is read, not as a refused proof on a peer.
inline constexpr size_t kSecretHexDigits = 64;
Status CheckSecret(std::string_view secret);

// The session keys of one authenticated connection, one per direction (AES-256-GCM,
// transfer_engine/channel.h): HMAC-SHA256(secret, "ft-transfer/2 key <sender role>" || Ns || Nc).
// Fresh nonces on both sides make them new every connection; only holders of the secret who saw
// this handshake can compute them.
using SessionKey = std::array<uint8_t, 32>;
SessionKey DeriveKey(std::string_view secret, Role sender, const wire::Nonce& server_nonce,
                     const wire::Nonce& client_nonce);

}  // namespace ft::rdma::auth

#endif  // FT_TRANSFER_ENGINE_AUTH_H_

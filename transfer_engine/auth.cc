#include "transfer_engine/auth.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fmt/format.h>

#include <string>

namespace ft::rdma::auth {

Status RandomNonce(wire::Nonce* out) {
  if (RAND_bytes(out->data(), static_cast<int>(out->size())) != 1)
    return Status::Internal("the OpenSSL random generator failed to produce a nonce");
  return Status::Ok();
}

wire::Mac ComputeMac(std::string_view secret, Role role, const wire::Nonce& server_nonce,
                     const wire::Nonce& client_nonce) {
  // Version 2 kept version 1's proofs (transfer_engine/wire_v2.h).
  std::string message = role == Role::kClient ? wire::v1::kClientProofContext : wire::v1::kServerProofContext;
  message.append(reinterpret_cast<const char*>(server_nonce.data()), server_nonce.size());
  message.append(reinterpret_cast<const char*>(client_nonce.data()), client_nonce.size());
  wire::Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &len);
  return mac;
}

Status CheckSecret(std::string_view secret) {
  bool hex = secret.size() == kSecretHexDigits;
  for (char c : secret) {
    hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'));
  }
  if (hex) return Status::Ok();
  return Status::InvalidArgument(fmt::format(
      "the transfer secret is {} bytes, not {} hex digits (ftmaster writes it to "
      "ft:{{<job>}}:transfer:secret; a secret file holds it on its first line)",
      secret.size(), kSecretHexDigits));
}

SessionKey DeriveKey(std::string_view secret, Role sender, const wire::Nonce& server_nonce,
                     const wire::Nonce& client_nonce) {
  std::string message = sender == Role::kClient ? wire::v2::kClientKeyContext : wire::v2::kServerKeyContext;
  message.append(reinterpret_cast<const char*>(server_nonce.data()), server_nonce.size());
  message.append(reinterpret_cast<const char*>(client_nonce.data()), client_nonce.size());
  SessionKey key{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), key.data(), &len);
  return key;
}

bool VerifyMac(std::string_view secret, Role role, const wire::Nonce& server_nonce,
               const wire::Nonce& client_nonce, const wire::Mac& mac) {
  wire::Mac expected = ComputeMac(secret, role, server_nonce, client_nonce);
  return CRYPTO_memcmp(expected.data(), mac.data(), mac.size()) == 0;
}

}  // namespace ft::rdma::auth

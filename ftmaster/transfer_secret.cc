#include "ftmaster/transfer_secret.h"

#include <errno.h>
#include <sys/random.h>

#include <array>
#include <cstdint>

namespace ft::master {

Status NewTransferSecret(std::string* hex) {
  std::array<uint8_t, kTransferSecretBytes> bytes{};
  size_t have = 0;
  while (have < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + have, bytes.size() - have, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "getrandom for the job's transfer secret");
    }
    have += static_cast<size_t>(n);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  bytes.fill(0);
  *hex = std::move(out);
  return Status::Ok();
}

bool IsTransferSecret(const std::string& value) {
  if (value.size() != 2 * kTransferSecretBytes) return false;
  for (char c : value) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace ft::master

// ft::rdma::Sealer: the protection of an authenticated transfer connection after its handshake
// (docs/transfer-protocol.md, "The sealed session"). Each direction has its own key
// (auth::DeriveKey) and its own message counter; every message is AES-256-GCM with the counter
// as its nonce, the frame's 12-byte header as associated data, and a 16-byte tag. So a frame
// that someone without the keys wrote, changed, replayed, dropped or reordered fails the next
// Open and the connection ends. Control frames are encrypted too (region names, manifests,
// the verbs path's addresses, rkeys, QP numbers and PSNs); a data frame's 20-byte header is,
// and its bytes are when the client asked for it (wire::kOpenEncryptData).
//
// Not thread-safe: one Sealer per direction of one connection, used by the thread (or strand)
// that sends, respectively receives, that direction's frames in order.
#ifndef FT_TRANSFER_ENGINE_CHANNEL_H_
#define FT_TRANSFER_ENGINE_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "transfer_engine/auth.h"
#include "transfer_engine/wire.h"

namespace ft::rdma {

class Sealer {
 public:
  Sealer();
  ~Sealer();
  Sealer(const Sealer&) = delete;
  Sealer& operator=(const Sealer&) = delete;

  // Keys this direction; messages count from 0.
  Status Start(const auth::SessionKey& key, bool encrypting);
  bool started() const { return started_; }

  // One message in parts: Begin (the associated data), Update any number of times (in may equal
  // out: in place), then Finish, which writes the tag (sealing) or checks it (opening:
  // Corrupt when it does not match — the bytes already written must not be trusted).
  Status Begin(std::string_view aad);
  Status Update(const uint8_t* in, uint8_t* out, size_t len);
  Status FinishSeal(uint8_t* tag /* kTagBytes */);
  Status FinishOpen(const uint8_t* tag /* kTagBytes */);

  // A whole control frame as wire's encoders make it (header + plain payload): the length in
  // its header grows by the tag, the payload is encrypted in place and the tag appended.
  Status SealFrame(std::string* frame);
  // A sealed control frame's payload (ciphertext then tag) after its header `header`: replaced
  // by the plain payload. Corrupt when it is not what the peer sealed as its next message.
  Status OpenPayload(const uint8_t* header /* kHeaderBytes */, std::string* payload);

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  bool started_ = false;
  bool encrypting_ = true;
  uint64_t counter_ = 0;
};

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_CHANNEL_H_

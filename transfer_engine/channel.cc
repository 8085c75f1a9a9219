#include "transfer_engine/channel.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cstring>

namespace ft::rdma {

struct Sealer::Ctx {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  ~Ctx() { EVP_CIPHER_CTX_free(ctx); }
};

Sealer::Sealer() : ctx_(std::make_unique<Ctx>()) {}
Sealer::~Sealer() = default;

Status Sealer::Start(const auth::SessionKey& key, bool encrypting) {
  encrypting_ = encrypting;
  counter_ = 0;
  EVP_CIPHER_CTX* c = ctx_->ctx;
  if (c == nullptr) return Status::Internal("OpenSSL: no cipher context");
  const int ok = encrypting ? EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), nullptr, key.data(), nullptr)
                            : EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), nullptr, key.data(), nullptr);
  if (ok != 1 || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, nullptr) != 1)
    return Status::Internal("OpenSSL: AES-256-GCM setup failed");
  started_ = true;
  return Status::Ok();
}

Status Sealer::Begin(std::string_view aad) {
  // The nonce: 4 zero bytes and the message counter, little-endian. Each direction has its own
  // key, so a counter never repeats under one key.
  uint8_t iv[12] = {};
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(counter_ >> (8 * i));
  ++counter_;
  EVP_CIPHER_CTX* c = ctx_->ctx;
  int len = 0;
  const int ok = encrypting_ ? EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, iv)
                             : EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, iv);
  if (ok != 1) return Status::Internal("OpenSSL: AES-256-GCM nonce");
  if (!aad.empty()) {
    const auto* p = reinterpret_cast<const unsigned char*>(aad.data());
    const int r = encrypting_ ? EVP_EncryptUpdate(c, nullptr, &len, p, static_cast<int>(aad.size()))
                              : EVP_DecryptUpdate(c, nullptr, &len, p, static_cast<int>(aad.size()));
    if (r != 1) return Status::Internal("OpenSSL: AES-256-GCM associated data");
  }
  return Status::Ok();
}

Status Sealer::Update(const uint8_t* in, uint8_t* out, size_t len) {
  EVP_CIPHER_CTX* c = ctx_->ctx;
  // EVP takes int lengths: a piece of up to 64 MiB goes through in 1 GiB-safe steps anyway.
  constexpr size_t kStep = 1u << 30;
  for (size_t done = 0; done < len;) {
    const int n = static_cast<int>(std::min(kStep, len - done));
    int written = 0;
    const int r = encrypting_ ? EVP_EncryptUpdate(c, out + done, &written, in + done, n)
                              : EVP_DecryptUpdate(c, out + done, &written, in + done, n);
    if (r != 1 || written != n) return Status::Internal("OpenSSL: AES-256-GCM update");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status Sealer::FinishSeal(uint8_t* tag) {
  int len = 0;
  uint8_t none[16];
  if (EVP_EncryptFinal_ex(ctx_->ctx, none, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_->ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(wire::kTagBytes), tag) != 1)
    return Status::Internal("OpenSSL: AES-256-GCM tag");
  return Status::Ok();
}

Status Sealer::FinishOpen(const uint8_t* tag) {
  uint8_t copy[wire::kTagBytes];
  std::memcpy(copy, tag, sizeof(copy));
  int len = 0;
  uint8_t none[16];
  if (EVP_CIPHER_CTX_ctrl(ctx_->ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(sizeof(copy)), copy) != 1)
    return Status::Internal("OpenSSL: AES-256-GCM tag");
  if (EVP_DecryptFinal_ex(ctx_->ctx, none, &len) != 1)
    return Status::Corrupt(fmt::format(
        "message {} of the session failed authentication (not sealed with this session's key: "
        "changed, forged, replayed or out of order)",
        counter_ - 1));
  return Status::Ok();
}

Status Sealer::SealFrame(std::string* frame) {
  if (frame->size() < wire::kHeaderBytes) return Status::Internal("sealing a frame without a header");
  auto* bytes = reinterpret_cast<uint8_t*>(frame->data());
  wire::FrameHeader h;
  FT_RETURN_IF_ERROR(wire::ParseHeader(bytes, &h));
  const size_t plain = frame->size() - wire::kHeaderBytes;
  wire::EncodeHeader(h.type, static_cast<uint32_t>(plain + wire::kTagBytes), bytes);
  FT_RETURN_IF_ERROR(Begin(std::string_view(frame->data(), wire::kHeaderBytes)));
  FT_RETURN_IF_ERROR(Update(bytes + wire::kHeaderBytes, bytes + wire::kHeaderBytes, plain));
  uint8_t tag[wire::kTagBytes];
  FT_RETURN_IF_ERROR(FinishSeal(tag));
  frame->append(reinterpret_cast<const char*>(tag), sizeof(tag));
  return Status::Ok();
}

Status Sealer::OpenPayload(const uint8_t* header, std::string* payload) {
  if (payload->size() < wire::kTagBytes)
    return Status::Corrupt(fmt::format("a sealed frame of {} bytes has no room for its tag", payload->size()));
  const size_t plain = payload->size() - wire::kTagBytes;
  auto* bytes = reinterpret_cast<uint8_t*>(payload->data());
  FT_RETURN_IF_ERROR(Begin(std::string_view(reinterpret_cast<const char*>(header), wire::kHeaderBytes)));
  FT_RETURN_IF_ERROR(Update(bytes, bytes, plain));
  FT_RETURN_IF_ERROR(FinishOpen(bytes + plain));
  payload->resize(plain);
  return Status::Ok();
}

}  // namespace ft::rdma

// Helpers for the verbs tests: a region over a byte vector, a verbs server and client on two
// fake devices wired through a direct Exchange (standing in for the engine's control channel).
#ifndef FT_TRANSFER_ENGINE_VERBS_TESTS_VERBS_TEST_UTIL_H_
#define FT_TRANSFER_ENGINE_VERBS_TESTS_VERBS_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "transfer_engine/transfer.h"
#include "transfer_engine/verbs/tests/fake_verbs.h"
#include "transfer_engine/verbs/verbs_transport.h"

namespace ft::rdma::testing {

class BufferRegion : public Region {
 public:
  explicit BufferRegion(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  const uint8_t* data() const override { return bytes_.data(); }
  uint64_t size() const override { return bytes_.size(); }
  std::string_view meta() const override { return "meta"; }
  bool StillValid() const override { return true; }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A region over part of someone else's memory (an arena's data inside its mapping).
class ViewRegion : public Region {
 public:
  ViewRegion(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  const uint8_t* data() const override { return data_; }
  uint64_t size() const override { return size_; }
  std::string_view meta() const override { return ""; }
  bool StillValid() const override { return true; }

 private:
  const uint8_t* data_;
  uint64_t size_;
};

inline std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  std::mt19937_64 rng(seed);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

inline std::vector<Piece> Pieces(uint64_t bytes, uint64_t piece) {
  std::vector<Piece> out;
  for (uint64_t at = 0; at < bytes; at += piece) out.push_back({at, std::min(piece, bytes - at)});
  return out;
}

struct VerbsPair {
  std::shared_ptr<VerbsDevice> server_device, client_device;
  std::unique_ptr<VerbsServer> server;
  std::unique_ptr<VerbsClient> client;
  int exchanges = 0;

  // Server on fake0, client on fake1.
  Status Open(const VerbsApi& api, VerbsOptions options = {}) {
    VerbsOptions s = options, c = options;
    s.device = "fake0";
    c.device = "fake1";
    FT_RETURN_IF_ERROR(VerbsDevice::Open(api, s, &server_device));
    FT_RETURN_IF_ERROR(VerbsDevice::Open(api, c, &client_device));
    server = std::make_unique<VerbsServer>(server_device, s);
    client = std::make_unique<VerbsClient>(client_device, c);
    return Status::Ok();
  }

  Status Connect(const Region& region, uint8_t* dest, uint64_t bytes, std::unique_ptr<PiecePath>* out) {
    std::string offer = server->Offer(region);
    if (offer.empty()) return Status::Unavailable("not offered");
    Exchange exchange = [&](std::string_view request, std::string* reply) {
      ++exchanges;
      return server->Accept(region, request, reply);
    };
    return client->Connect(offer, dest, bytes, exchange, out);
  }

  void Close() {
    client.reset();
    server.reset();
    client_device.reset();
    server_device.reset();
  }
};

}  // namespace ft::rdma::testing

#endif  // FT_TRANSFER_ENGINE_VERBS_TESTS_VERBS_TEST_UTIL_H_

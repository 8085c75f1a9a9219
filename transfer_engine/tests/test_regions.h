// Test regions for the transfer engine: deterministic bytes from a seed (the same function in
// the test and in transfer_peer, so a pull's result is checked without shipping the bytes), an
// in-memory Region and a provider serving a map of them.
#ifndef FT_TRANSFER_ENGINE_TESTS_TEST_REGIONS_H_
#define FT_TRANSFER_ENGINE_TESTS_TEST_REGIONS_H_

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "transfer_engine/transfer.h"

namespace ft::rdma::testing {

// splitmix64 over 8-byte words: fast, and every byte depends on seed and offset.
inline std::vector<uint8_t> Pattern(uint64_t seed, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t off = 0; off < bytes; off += 8) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(out.data() + off, &z, std::min<uint64_t>(8, bytes - off));
  }
  return out;
}

class MemoryRegion : public Region {
 public:
  MemoryRegion(std::vector<uint8_t> bytes, std::string meta)
      : bytes_(std::move(bytes)), meta_(std::move(meta)) {}
  const uint8_t* data() const override { return bytes_.data(); }
  uint64_t size() const override { return bytes_.size(); }
  std::string_view meta() const override { return meta_; }
  bool StillValid() const override { return valid_.load(); }
  void Invalidate() { valid_ = false; }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  std::string meta_;
  std::atomic<bool> valid_{true};
};

class MapProvider : public RegionProvider {
 public:
  void Add(const std::string& name, std::shared_ptr<const Region> region) {
    MutexLock lock(&mu_);
    regions_[name] = std::move(region);
  }
  Status Open(std::string_view name, std::shared_ptr<const Region>* out) override {
    MutexLock lock(&mu_);
    auto it = regions_.find(std::string(name));
    if (it == regions_.end()) return Status::NotFound(std::string(name) + ": no such copy here");
    *out = it->second;
    return Status::Ok();
  }

 private:
  Mutex mu_;
  std::map<std::string, std::shared_ptr<const Region>> regions_ GUARDED_BY(mu_);
};

// A verify function comparing each chunk with the expected bytes, counting calls.
struct ExpectedBytes {
  std::vector<uint8_t> bytes;
  uint64_t chunk_bytes = 0;
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::function<bool(uint64_t, const uint8_t*, uint64_t)> Verifier() const {
    return [this](uint64_t index, const uint8_t* data, uint64_t len) {
      calls->fetch_add(1);
      uint64_t off = index * chunk_bytes;
      return off + len <= bytes.size() && std::memcmp(bytes.data() + off, data, len) == 0;
    };
  }
};

}  // namespace ft::rdma::testing

#endif  // FT_TRANSFER_ENGINE_TESTS_TEST_REGIONS_H_

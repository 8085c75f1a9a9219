#include "bench/pull_bench/server.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string_view>

#include "bench/pull_bench/memory.h"
#include "bench/pull_bench/socket_copy.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "transfer_engine/transfer.h"

namespace ft::bench {
namespace {

// The served copy: the pattern, with a real checkpoint manifest (one buffer, a checksum per
// chunk) as its meta, so the client verifies exactly as a restore does.
class BenchRegion : public rdma::Region {
 public:
  BenchRegion(const uint8_t* data, uint64_t size, std::string meta) : data_(data), size_(size), meta_(std::move(meta)) {}
  const uint8_t* data() const override { return data_; }
  uint64_t size() const override { return size_; }
  std::string_view meta() const override { return meta_; }
  bool StillValid() const override { return true; }  // never overwritten while served

 private:
  const uint8_t* data_;
  uint64_t size_;
  std::string meta_;
};

class OneRegion : public rdma::RegionProvider {
 public:
  explicit OneRegion(std::shared_ptr<const rdma::Region> region) : region_(std::move(region)) {}
  Status Open(std::string_view name, std::shared_ptr<const rdma::Region>* out) override {
    if (name != kRegionName) return Status::NotFound("no region " + std::string(name));
    *out = region_;
    return Status::Ok();
  }

 private:
  std::shared_ptr<const rdma::Region> region_;
};

Status BuildManifest(const uint8_t* data, uint64_t bytes, uint64_t chunk_bytes, std::string* out) {
  ckpt::Manifest m;
  m.job = "bench-pull";
  m.rank = 0;
  m.world_size = 1;
  m.step = 100;
  m.chunk_bytes = chunk_bytes;
  const ckpt::BufferEntry state{"state", bytes, 0};
  Status s = ckpt::PlanLayout({&state, 1}, &m.buffers, &m.data_bytes);
  if (!s.ok()) return s;
  if (m.data_bytes != bytes) return Status::InvalidArgument("--bytes must be a multiple of 4096");
  m.created_unix_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  for (size_t i = 0; i < m.chunk_count(); ++i) {
    m.chunk_checksums.push_back(ckpt::Checksum(data + m.chunk_begin(i), m.chunk_end(i) - m.chunk_begin(i)));
  }
  *out = ckpt::EncodeManifest(m);
  return Status::Ok();
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "pull_bench serve: %s\n", why.c_str());
  return 1;
}

}  // namespace

int RunServer(const ServeOptions& options) {
  std::string secret;
  if (!std::getline(std::cin, secret) || secret.empty()) return Fail("no secret on stdin");

  const auto t0 = std::chrono::steady_clock::now();
  Buffer memory;
  std::string why;
  if (!memory.Allocate(options.bytes, &why)) return Fail(why);
  FillPattern(memory.data(), memory.size());
  std::string meta;
  Status s = BuildManifest(memory.data(), memory.size(), options.chunk_bytes, &meta);
  if (!s.ok()) return Fail("manifest: " + s.ToString());
  const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  OneRegion provider(std::make_shared<BenchRegion>(memory.data(), memory.size(), std::move(meta)));
  rdma::ServerOptions so;
  so.listen_address = options.address;
  so.secret = secret;
  so.provider = &provider;
  so.io_threads = options.io_threads;
  rdma::Server server(so);
  s = server.Start();
  if (!s.ok()) return Fail("rdma::Server::Start: " + s.ToString());
  SocketSender sender(memory.data(), memory.size());
  if (!sender.Start(options.address, &why)) return Fail(why);

  std::printf("ready engine_port=%u socket_port=%u region=%s fill_s=%.2f\n", server.port(), sender.port(), kRegionName,
              fill_s);
  std::fflush(stdout);
  char buf[256];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  sender.Stop();
  server.Stop();
  const rdma::ServerStats st = server.stats();
  std::fprintf(stderr, "pull_bench serve: engine served %llu connections, %llu reads, %llu bytes, refused %llu\n",
               static_cast<unsigned long long>(st.connections), static_cast<unsigned long long>(st.reads),
               static_cast<unsigned long long>(st.bytes_sent), static_cast<unsigned long long>(st.auth_refused));
  return 0;
}

}  // namespace ft::bench

#include "ftworker/transfer/pull_command.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "ftworker/transfer/region_name.h"
#include "jitckpt/checksum.h"
#include "jitckpt/manifest.h"
#include "proto/keys.h"
#include "proto/transfer_codec.h"
#include "redis/client.h"
#include "redis/cluster.h"
#include "schema/node_hashes.h"
#include "schema/published.h"
#include "transfer_engine/transfer.h"

namespace ft::worker {

namespace {

// Anonymous memory for the pulled bytes (no zero-filled vector to pay for first).
struct Buffer {
  uint8_t* data = nullptr;
  uint64_t bytes = 0;
  ~Buffer() {
    if (data != nullptr) munmap(data, bytes);
  }
};

Status WriteFile(const std::string& path, const uint8_t* data, uint64_t bytes) {
  const std::string temp = path + ".tmp";
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "creating " + temp);
  uint64_t done = 0;
  while (done < bytes) {
    ssize_t n = write(fd, data + done, std::min<uint64_t>(bytes - done, 64ull << 20));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = Status::FromErrno(errno, "writing " + temp);
      close(fd);
      unlink(temp.c_str());
      return s;
    }
    done += static_cast<uint64_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    Status s = Status::FromErrno(errno, "closing " + temp);
    unlink(temp.c_str());
    return s;
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    Status s = Status::FromErrno(errno, "renaming " + temp);
    unlink(temp.c_str());
    return s;
  }
  return Status::Ok();
}

Status ReadSecretFile(const std::string& path, std::string* out) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return Status::InvalidArgument("cannot read the secret file " + path);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  *out = line;
  return Status::Ok();
}

int Fail(const Status& s, int code) {
  std::fprintf(stderr, "ftworker pull: %s\n", std::string(s.message()).c_str());
  return code;
}

}  // namespace

int RunPull(const PullCommand& c) {
  RegionName name;
  if (Status s = ParseRegionName(c.region, &name); !s.ok()) return Fail(s, 2);
  if (c.from.empty() || c.out.empty()) {
    return Fail(Status::InvalidArgument("--from NODE and --out FILE are required"), 2);
  }
  const proto::Keys keys(c.job);
  std::unique_ptr<redis::Commands> connection;
  if (Status s = redis::OpenCommands(c.redis, std::chrono::seconds(3), std::chrono::seconds(3), &connection);
      !s.ok()) {
    return Fail(s, 2);
  }
  redis::Commands& db = *connection;

  rdma::PullOptions options;
  options.connections = std::max(1, c.connections);
  options.min_bytes_per_second = c.min_bytes_per_second;
  if (!c.secret_file.empty()) {
    if (Status s = ReadSecretFile(c.secret_file, &options.secret); !s.ok()) return Fail(s, 2);
  } else {
    redis::Reply secret;
    if (Status s = db.Run(schema::GetTransferSecret(keys), &secret); !s.ok()) return Fail(s, 2);
    if (!secret.is_string()) {
      return Fail(Status::NotFound(fmt::format("{} is not set: the job's master has not created it",
                                               keys.TransferSecret())), 2);
    }
    options.secret = secret.str();
  }
  redis::Reply value;
  if (Status s = db.Run(schema::GetEndpoint(keys, c.from), &value); !s.ok()) return Fail(s, 2);
  if (!value.is_string()) {
    return Fail(Status::NotFound(fmt::format("node '{}' publishes no transfer endpoint in {} (is its "
                                             "ftworker running and serving?)", c.from, keys.Endpoints())), 2);
  }
  proto::TransferEndpoint endpoint;
  if (Status s = schema::DecodeEndpoint(value.str(), &endpoint); !s.ok()) {
    return Fail(s.WithContext(fmt::format("{} {}", keys.Endpoints(), c.from)), 2);
  }
  const rdma::Peer peer{c.from, endpoint.address, endpoint.port};

  rdma::RegionInfo info;
  if (Status s = rdma::Stat(options, peer, c.region, &info); !s.ok()) return Fail(s, 1);
  ckpt::Manifest m;
  Status parsed = ckpt::ParseManifest({reinterpret_cast<const uint8_t*>(info.meta.data()), info.meta.size()}, &m);
  if (!parsed.ok()) return Fail(parsed.WithContext("the manifest " + c.from + " sent"), 1);
  if (m.step != name.step || m.rank != name.rank) {
    return Fail(Status::Corrupt(fmt::format("{} sent a manifest of step {} rank {} for {}", c.from, m.step,
                                            m.rank, c.region)), 1);
  }
  if (m.data_bytes != info.size || m.chunk_bytes == 0) {
    return Fail(Status::Corrupt(fmt::format("{} serves {} bytes, its manifest describes {}", c.region,
                                            info.size, m.data_bytes)), 1);
  }
  Buffer buffer;
  buffer.bytes = std::max<uint64_t>(info.size, 1);
  void* p = mmap(nullptr, buffer.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Fail(Status::FromErrno(errno, "allocating the destination"), 2);
  buffer.data = static_cast<uint8_t*>(p);

  rdma::PullRequest request;
  request.sources = {rdma::PullSource{peer, c.region}};
  request.dest = buffer.data;
  request.bytes = info.size;
  request.chunk_bytes = m.chunk_bytes;
  request.verify = [&m](uint64_t index, const uint8_t* data, uint64_t len) {
    return index < m.chunk_checksums.size() && ckpt::Checksum(data, len) == m.chunk_checksums[index];
  };
  rdma::PullResult result;
  Status pulled = rdma::Pull(options, request, &result);
  if (!pulled.ok()) {
    for (const std::string& note : result.notes) std::fprintf(stderr, "ftworker pull: %s\n", note.c_str());
    return Fail(pulled, 1);
  }
  if (Status s = WriteFile(c.out, buffer.data, info.size); !s.ok()) return Fail(s, 1);
  if (Status s = WriteFile(c.out + ".manifest", reinterpret_cast<const uint8_t*>(info.meta.data()),
                           info.meta.size());
      !s.ok()) {
    return Fail(s, 1);
  }
  std::printf("pulled %s from %s (%s:%u): %llu bytes, %zu chunks verified, step %lld rank %d, %.3f s "
              "(%.1f MB/s), first byte %.1f ms, %llu refetched\n",
              c.region.c_str(), c.from.c_str(), endpoint.address.c_str(), static_cast<unsigned>(endpoint.port),
              static_cast<unsigned long long>(result.bytes), m.chunk_count(), static_cast<long long>(m.step),
              m.rank, result.seconds, result.seconds > 0 ? result.bytes / result.seconds / 1e6 : 0.0,
              result.first_byte_ms, static_cast<unsigned long long>(result.refetched_chunks));
  return 0;
}

}  // namespace ft::worker

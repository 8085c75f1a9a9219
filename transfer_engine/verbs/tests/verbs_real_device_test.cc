// Tests that need a real RDMA NIC; each skips itself where ibv_get_device_list finds none
// (every development machine and CI here). On an RDMA host they pull through the NIC's
// loopback, server and client on the same device: FT_RDMA_DEVICE, FT_RDMA_PORT and
// FT_RDMA_GID_INDEX pick the device as for ftworker. The throughput test prints a RESULT line
// to compare with perftest's ib_read_bw on the same device (transfer_engine/README.md).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/config.h"
#include "transfer_engine/tests/test_regions.h"
#include "transfer_engine/transfer.h"
#include "transfer_engine/verbs/verbs_setup.h"

namespace ft::rdma::testing {
namespace {

constexpr char kSecret[] = "dev1ce00dev1ce00dev1ce00dev1ce00dev1ce00dev1ce00dev1ce00dev1ce00";

// The transport on the real library and device, or a reason to skip.
bool OpenReal(VerbsTransport* transport, std::string* why) {
  const VerbsApi* api = nullptr;
  Status s = LoadVerbs(&api);
  if (s.ok()) {
    int n = 0;
    ibv_device** list = api->get_device_list(&n);
    if (list != nullptr) api->free_device_list(list);
    if (list == nullptr || n == 0) s = Status::Unavailable("no RDMA device on this host");
  }
  Config config;
  std::vector<std::string> warnings;
  if (s.ok()) s = Config::Load(Environment::FromProcess(), &config, &warnings);
  if (s.ok()) s = OpenVerbsTransport(config, api, transport);
  *why = s.ToString();
  return s.ok();
}

struct Served {
  MapProvider provider;
  std::unique_ptr<Server> server;
};

void Serve(VerbsTransport& transport, std::vector<uint8_t> bytes, Served* served) {
  auto region = std::make_shared<MemoryRegion>(std::move(bytes), "");
  ASSERT_TRUE(transport.server->Register(region->data(), region->size()).ok());  // as at arena creation
  served->provider.Add("arena/1/0", region);
  ServerOptions options;
  options.listen_address = "127.0.0.1";
  options.secret = kSecret;
  options.provider = &served->provider;
  options.fast_path = transport.server.get();
  served->server = std::make_unique<Server>(options);
  ASSERT_TRUE(served->server->Start().ok());
}

Status PullOverVerbs(VerbsTransport& transport, Served& served, std::vector<uint8_t>* dest, uint64_t chunk,
                     const ExpectedBytes& expected, PullResult* result) {
  PullOptions options;
  options.secret = kSecret;
  options.fast_path = transport.client.get();
  PullRequest request;
  request.sources = {{{"self", "127.0.0.1", served.server->port()}, "arena/1/0"}};
  request.dest = dest->data();
  request.bytes = dest->size();
  request.chunk_bytes = chunk;
  request.verify = expected.Verifier();
  return Pull(options, request, result);
}

TEST(verbs_real_device, LoopbackPullMovesEveryByteByRdma) {
  VerbsTransport transport;
  std::string why;
  if (!OpenReal(&transport, &why)) GTEST_SKIP() << why;
  ExpectedBytes expected;
  expected.bytes = Pattern(5, (64ull << 20) + 4097);
  expected.chunk_bytes = 4ull << 20;
  Served served;
  Serve(transport, expected.bytes, &served);
  std::vector<uint8_t> dest(expected.bytes.size());
  ASSERT_TRUE(transport.client->Register(dest.data(), dest.size()).ok());
  PullResult result;
  Status s = PullOverVerbs(transport, served, &dest, expected.chunk_bytes, expected, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dest, expected.bytes);
  EXPECT_EQ(result.bytes_by_source["self/verbs"], dest.size());
  EXPECT_EQ(served.server->stats().bytes_sent, 0u);
}

TEST(verbs_real_device, LoopbackPullThroughput) {
  VerbsTransport transport;
  std::string why;
  if (!OpenReal(&transport, &why)) GTEST_SKIP() << why;
  constexpr uint64_t kBytes = 2ull << 30;  // what bench-pull moves
  ExpectedBytes expected;
  expected.bytes = Pattern(6, kBytes);
  expected.chunk_bytes = 64ull << 20;
  Served served;
  Serve(transport, expected.bytes, &served);
  std::vector<uint8_t> dest(kBytes);
  ASSERT_TRUE(transport.client->Register(dest.data(), dest.size()).ok());  // not timed: done at arena creation
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    PullResult result;
    auto start = std::chrono::steady_clock::now();
    Status s = PullOverVerbs(transport, served, &dest, expected.chunk_bytes, expected, &result);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(result.bytes_by_source["self/verbs"], kBytes);
    best = std::max(best, kBytes * 8 / seconds / 1e9);
  }
  std::printf("RESULT verbs_loopback device=%s bytes=%llu gbps=%.2f (pull + verify, best of 3)\n",
              transport.device->name().c_str(), static_cast<unsigned long long>(kBytes), best);
}

}  // namespace
}  // namespace ft::rdma::testing

// Loading libibverbs and opening a device: the library or the device being absent is an
// Unavailable with a message, never a crash; the one test that needs a real NIC skips itself
// where ibv_get_device_list finds none (every development machine and CI).
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "transfer_engine/verbs/tests/fake_verbs.h"
#include "transfer_engine/verbs/tests/verbs_test_util.h"
#include "transfer_engine/verbs/verbs_api.h"
#include "transfer_engine/verbs/verbs_device.h"
#include "transfer_engine/verbs/verbs_setup.h"

namespace ft::rdma::testing {
namespace {

bool HasRealDevice(const VerbsApi** api) {
  if (!LoadVerbs(api).ok()) return false;
  int n = 0;
  ibv_device** list = (*api)->get_device_list(&n);
  if (list != nullptr) (*api)->free_device_list(list);
  return list != nullptr && n > 0;
}

TEST(verbs_device_absent, MissingLibraryIsUnavailableWithAHint) {
  const VerbsApi* api = nullptr;
  Status s = LoadVerbs(&api, "libibverbs-does-not-exist.so.1");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("libibverbs-does-not-exist.so.1"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("TCP"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(api, nullptr);
}

TEST(verbs_device_absent, LibraryWithoutVerbsSymbolsIsUnavailable) {
  const VerbsApi* api = nullptr;
  Status s = LoadVerbs(&api, "libm.so.6");  // loads, but is no libibverbs
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("ibv_get_device_list"), std::string_view::npos) << s.ToString();
}

// On this host (no RDMA kernel support) the real library loads and finds no device.
TEST(verbs_device_absent, RealLibraryWithoutDevicesIsUnavailable) {
  const VerbsApi* api = nullptr;
  Status loaded = LoadVerbs(&api);
  if (!loaded.ok()) GTEST_SKIP() << "libibverbs not installed: " << loaded.ToString();
  const VerbsApi* again = nullptr;
  ASSERT_TRUE(LoadVerbs(&again).ok());
  EXPECT_EQ(again, api) << "loaded once, shared";
  // Every entry is filled: a missing symbol would have made the load Unavailable instead.
  const void* const* entries = reinterpret_cast<const void* const*>(api);
  for (size_t i = 0; i < sizeof(VerbsApi) / sizeof(void*); ++i) EXPECT_NE(entries[i], nullptr) << "entry " << i;
  const VerbsApi* probe = nullptr;
  if (HasRealDevice(&probe)) GTEST_SKIP() << "this host has an RDMA device";
  std::shared_ptr<VerbsDevice> device;
  Status s = VerbsDevice::Open(*api, VerbsOptions{}, &device);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("no RDMA device"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(device, nullptr);
}

TEST(verbs_device_absent, EmptyDeviceListIsUnavailable) {
  FakeNicConfig config;
  config.devices = 0;
  FakeVerbs fake(config);
  std::shared_ptr<VerbsDevice> device;
  Status s = VerbsDevice::Open(fake.api(), VerbsOptions{}, &device);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(device, nullptr);
}

TEST(verbs_device_absent, FailingDeviceListIsUnavailableAndSaysWhy) {
  FakeNicConfig config;
  config.device_list_errno = ENOSYS;
  FakeVerbs fake(config);
  std::shared_ptr<VerbsDevice> device;
  Status s = VerbsDevice::Open(fake.api(), VerbsOptions{}, &device);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find(std::strerror(ENOSYS)), std::string_view::npos) << s.ToString();
}

TEST(verbs_device_absent, NamedDeviceMissingOrPortDownIsUnavailable) {
  {
    FakeVerbs fake;
    VerbsOptions options;
    options.device = "mlx5_7";
    std::shared_ptr<VerbsDevice> device;
    Status s = VerbsDevice::Open(fake.api(), options, &device);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("mlx5_7"), std::string_view::npos) << s.ToString();
    EXPECT_EQ(fake.live_objects(), 0u);
  }
  {
    FakeNicConfig config;
    config.port_state = IBV_PORT_DOWN;
    FakeVerbs fake(config);
    std::shared_ptr<VerbsDevice> device;
    Status s = VerbsDevice::Open(fake.api(), VerbsOptions{}, &device);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("not active"), std::string_view::npos) << s.ToString();
    EXPECT_EQ(fake.live_objects(), 0u) << "contexts of skipped devices are closed";
  }
}

TEST(verbs_device, OpensTheFirstActiveDeviceAndReleasesEverything) {
  FakeVerbs fake;
  {
    std::shared_ptr<VerbsDevice> device;
    ASSERT_TRUE(VerbsDevice::Open(fake.api(), VerbsOptions{}, &device).ok());
    EXPECT_EQ(device->name(), "fake0");
    EXPECT_EQ(device->address().lid, 1);
    EXPECT_EQ(device->address().use_gid, 0) << "InfiniBand goes by LID unless a GID index is set";
    EXPECT_EQ(device->address().mtu, IBV_MTU_4096);
    EXPECT_GT(fake.live_objects(), 0u);
  }
  EXPECT_EQ(fake.live_objects(), 0u);
}

TEST(verbs_device, RoceUsesAGidAndRejectsBadSettings) {
  FakeNicConfig config;
  config.link_layer = IBV_LINK_LAYER_ETHERNET;
  FakeVerbs fake(config);
  std::shared_ptr<VerbsDevice> device;
  ASSERT_TRUE(VerbsDevice::Open(fake.api(), VerbsOptions{}, &device).ok());
  EXPECT_EQ(device->address().use_gid, 1);
  EXPECT_EQ(device->address().gid[0], 0xfe);
  VerbsOptions bad;
  bad.gid_index = 9;  // beyond the fake's 4-entry GID table
  bad.device = "fake1";
  std::shared_ptr<VerbsDevice> other;
  EXPECT_EQ(VerbsDevice::Open(fake.api(), bad, &other).code(), StatusCode::kUnavailable);
  bad.port = 0;
  EXPECT_EQ(VerbsDevice::Open(fake.api(), bad, &other).code(), StatusCode::kInvalidArgument);
}

TEST(verbs_device, LargeMemoryIsSplitAtTheNicsMaxMrSize) {
  FakeNicConfig config;
  config.max_mr_size = 1 << 20;
  FakeVerbs fake(config);
  std::shared_ptr<VerbsDevice> device;
  ASSERT_TRUE(VerbsDevice::Open(fake.api(), VerbsOptions{}, &device).ok());
  std::vector<uint8_t> buffer((5 << 19) + 7);  // 2.5 MiB + 7
  std::unique_ptr<VerbsMemory> memory;
  ASSERT_TRUE(VerbsMemory::Register(device, buffer.data(), buffer.size(), IBV_ACCESS_REMOTE_READ, &memory).ok());
  ASSERT_EQ(memory->mrs().size(), 3u);
  EXPECT_EQ(memory->mrs()[2].offset, 2u << 20);
  EXPECT_EQ(memory->mrs()[2].len, (1u << 19) + 7);
  EXPECT_EQ(&memory->MrAt((2u << 20) + 5), &memory->mrs()[2]);
  EXPECT_EQ(&memory->MrAt((1u << 20) - 1), &memory->mrs()[0]);
  memory.reset();
  EXPECT_EQ(fake.live_mrs(), 0u);
}

TEST(verbs_device, CacheRegistersARangeOnceAndReusesItForSubranges) {
  FakeVerbs fake;
  std::shared_ptr<VerbsDevice> device;
  ASSERT_TRUE(VerbsDevice::Open(fake.api(), VerbsOptions{}, &device).ok());
  VerbsMemoryCache cache(device, IBV_ACCESS_REMOTE_READ);
  std::vector<uint8_t> arena(1 << 16);
  std::shared_ptr<const VerbsMemory> whole, part;
  ASSERT_TRUE(cache.Get(arena.data(), arena.size(), &whole).ok());
  ASSERT_TRUE(cache.Get(arena.data() + 4096, 8192, &part).ok());
  EXPECT_EQ(whole, part);
  EXPECT_EQ(fake.registrations(), 1u);
  cache.Forget(arena.data(), arena.size());
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(fake.live_mrs(), 1u) << "still held by a user";
  whole.reset();
  part.reset();
  EXPECT_EQ(fake.live_mrs(), 0u);
}

}  // namespace
}  // namespace ft::rdma::testing

namespace ft::rdma::testing {
namespace {

Config RdmaConfig(std::initializer_list<std::pair<const char*, const char*>> vars) {
  std::map<std::string, std::string, std::less<>> env;
  for (auto& [k, v] : vars) env[k] = v;
  Config config;
  std::vector<std::string> warnings;
  Status s = Config::Load(Environment(env), &config, &warnings);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(warnings.empty());
  return config;
}

TEST(verbs_setup, SettingsReachTheTransport) {
  FakeVerbs fake;
  VerbsTransport transport;
  Config config = RdmaConfig({{"FT_RDMA_DEVICE", "fake1"}, {"FT_RDMA_QPS", "2"}, {"FT_RDMA_READS_PER_QP", "8"}});
  ASSERT_TRUE(OpenVerbsTransport(config, &fake.api(), &transport).ok());
  EXPECT_EQ(transport.device->name(), "fake1");
  VerbsOptions options = VerbsOptionsFromConfig(config);
  EXPECT_EQ(options.qps, 2);
  EXPECT_EQ(options.reads_per_qp, 8);
  EXPECT_EQ(options.gid_index, -1);
  EXPECT_NE(transport.server, nullptr);
  EXPECT_NE(transport.client, nullptr);
}

TEST(verbs_setup, OffOrBadSettingsAreExplained) {
  FakeVerbs fake;
  VerbsTransport transport;
  Status off = OpenVerbsTransport(RdmaConfig({{"FT_RDMA_VERBS", "0"}}), &fake.api(), &transport);
  EXPECT_EQ(off.code(), StatusCode::kUnavailable);
  EXPECT_NE(off.message().find("FT_RDMA_VERBS=0"), std::string_view::npos);
  Status bad = OpenVerbsTransport(RdmaConfig({{"FT_RDMA_QPS", "0"}}), &fake.api(), &transport);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(transport.device, nullptr);
  EXPECT_EQ(fake.live_objects(), 0u);
}

}  // namespace
}  // namespace ft::rdma::testing

// Single-process checks: conversions, exported symbols, argument validation without peers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "half.h"  // the library's own conversions (header-only)
#include "harness.h"

namespace gpusim_test {
namespace {

uint16_t Bits(__half h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint16_t Bits(__nv_bfloat16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
__half AsHalf(uint16_t b) {
  __half_raw r;
  r.x = b;
  return __half(r);
}
float AsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// The library rounds by hand; the CUDA headers' host conversions are the reference.
TEST(HalfConversion, MatchesCudaHeadersRoundToNearestEven) {
  using namespace gpusim::nccl;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float want = __half2float(AsHalf(static_cast<uint16_t>(h)));
    float got = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << "half 0x" << std::hex << h;
    }
    float bf = Bf16ToFloat(static_cast<uint16_t>(h)), bf_want = AsFloat(h << 16);
    ASSERT_EQ(std::memcmp(&bf, &bf_want, 4), 0) << "bf16 0x" << std::hex << h;
  }
  int checked = 0;
  auto check = [&](uint32_t x) {
    float f = AsFloat(x);
    if (std::isnan(f)) {
      EXPECT_EQ(FloatToHalf(f) & 0x7c00u, 0x7c00u);
      EXPECT_NE(FloatToHalf(f) & 0x3ffu, 0u);
      return;
    }
    ASSERT_EQ(FloatToHalf(f), Bits(__float2half_rn(f))) << "float bits 0x" << std::hex << x;
    ASSERT_EQ(FloatToBf16(f), Bits(__float2bfloat16_rn(f))) << "float bits 0x" << std::hex << x;
    ++checked;
  };
  for (uint64_t x = 0; x <= 0xffffffffull; x += 9973) check(static_cast<uint32_t>(x));
  // Exact halfway points and their neighbours, for every half exponent and both signs.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    float lo = __half2float(AsHalf(static_cast<uint16_t>(h)));
    float hi = __half2float(AsHalf(static_cast<uint16_t>(h + 1)));
    float mid = (lo + hi) / 2;  // exact in float
    uint32_t m;
    std::memcpy(&m, &mid, 4);
    for (uint32_t d : {m - 1, m, m + 1, m | 0x80000000u, (m + 1) | 0x80000000u}) check(d);
  }
  for (uint32_t x : {0x7f7fffffu, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x33000000u, 0x33000001u,
                     0x387fc000u, 0x387fe000u, 0x7f800000u, 0xff800000u, 0x80000000u}) {
    check(x);
  }
  EXPECT_GT(checked, 400000);
}

TEST(Api, VersionIdsAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, 22809);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  std::set<std::string> ids;
  for (int i = 0; i < 64; ++i) {
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ids.insert(std::string(id.internal, sizeof id.internal));
  }
  EXPECT_EQ(ids.size(), 64u);
  for (int r = 0; r <= ncclNumResults; ++r) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::strlen(s), 3u);
  }
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
  EXPECT_NE(ncclGetLastError(nullptr), nullptr);
}

TEST(Api, ArgumentErrorsWithoutACommunicator) {
  float x = 0;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::strstr(ncclGetLastError(nullptr), "NULL"), nullptr) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, 0, nullptr, nullptr), ncclInvalidArgument);
  int n = 0;
  EXPECT_EQ(ncclCommCount(nullptr, &n), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess);
  ncclComm_t comm = nullptr;
  ncclUniqueId id = NewId();
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
  EXPECT_EQ(info.estimatedTime, 0.0f);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // the simulation closed the group
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 1000), ncclSuccess);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 1000);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
}

// Exactly the nccl.h API is exported, each as a strong pncclX and a weak alias ncclX (and
// gpusim's own test queries, src/violation.h).
TEST(Api, ExportsStrongPncclAndWeakNcclAliases) {
  Dl_info info;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&ncclAllReduce), &info), 0);
  std::string path = info.dli_fname;
  EXPECT_NE(path.find("gpusim/libnccl.so.2"), std::string::npos) << path;
  FILE* f = popen(("nm -D --defined-only '" + path + "'").c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[512];
  std::set<std::string> strong, weak;
  int other = 0;
  while (std::fgets(line, sizeof line, f)) {
    char addr[64], type[8], name[256];
    if (std::sscanf(line, "%63s %7s %255s", addr, type, name) != 3) continue;
    std::string n = name;
    if (n.rfind("pnccl", 0) == 0 && std::string(type) == "T") strong.insert(n.substr(1));
    else if (n.rfind("nccl", 0) == 0 && std::string(type) == "W") weak.insert(n);
    else if (n != "gpusimNcclViolationCount" && n != "gpusimNcclLastViolation") ++other;
  }
  pclose(f);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(strong, weak);
  EXPECT_EQ(strong.size(), 41u);
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  for (const std::string& n : strong) {
    EXPECT_EQ(dlsym(h, n.c_str()), dlsym(h, ("p" + n).c_str())) << n;
  }
  for (const char* n : {"ncclCommShrink", "ncclCommRevoke", "ncclGroupSimulateEnd", "ncclCommInitRankScalable",
                        "ncclCommWindowRegister", "ncclRedOpCreatePreMulSum", "ncclResetDebugInit"}) {
    EXPECT_TRUE(strong.count(n)) << n;
  }
  dlclose(h);
}

}  // namespace
}  // namespace gpusim_test

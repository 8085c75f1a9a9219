#include "ftworker/health/pci_bus_id.h"

#include <gtest/gtest.h>

namespace ft::worker::health {
namespace {

TEST(PciBusIdTest, CudaNvmlAndSysfsSpellingsMeetInOneForm) {
  EXPECT_EQ(NormalizePciBusId("0000:3B:00.0"), "0000:3b:00.0");      // cudaDeviceGetPCIBusId
  EXPECT_EQ(NormalizePciBusId("00000000:3B:00.0"), "0000:3b:00.0");  // NVML's busId
  EXPECT_EQ(NormalizePciBusId("0000:3b:00.0"), "0000:3b:00.0");      // sysfs
  EXPECT_EQ(NormalizePciBusId("0001:c4:1f.7"), "0001:c4:1f.7");
}

TEST(PciBusIdTest, AnythingElseIsRefused) {
  for (const char* bad : {"", "3b:00.0", "0000:3b:00", "0000:3b:00.8", "0000:1ff:00.0", "0000:3b:20.0",
                          "zz:3b:00.0", "0000:3b:00.0 ", "0000::00.0", "100000000:3b:00.0"}) {
    EXPECT_EQ(NormalizePciBusId(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace ft::worker::health

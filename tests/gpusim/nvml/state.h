// The simulated GPUs' health, as the test's state file (GPUSIM_NVML_STATE, README.md) says, and
// the library's global state: init count, device count, handles. One mutex guards it all, as
// NVML is thread-safe; entry points take it for the whole call.
#ifndef GPUSIM_NVML_STATE_H_
#define GPUSIM_NVML_STATE_H_

#include <sys/types.h>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "nvml_abi.h"

// The handle NVML gives out: one static object per GPU, so handles stay valid across
// nvmlShutdown/nvmlInit as the real ones do.
struct nvmlDevice_st {
  int index;
};

namespace gpusim::nvml {

inline constexpr int kMaxGpus = 64;  // as gpusim's cudart (GPUSIM_DEVICE_COUNT 0..64)
inline constexpr int kLinks = NVML_NVLINK_MAX_LINKS;

struct GpuHealth {
  unsigned long long ecc_uncorrected = 0;  // volatile
  bool remap_failure = false;
  bool remap_pending = false;
  unsigned int retired_pages = 0;  // double-bit ECC cause
  unsigned long long throttle = 0;
  unsigned long long nvlink[kLinks][3] = {};  // per link: crc, replay, recovery
  unsigned int pcie_replay = 0;
  bool lost = false;
};

struct XidLine {
  int gpu;
  unsigned long long xid;
};

struct Health {
  GpuHealth gpus[kMaxGpus];
  std::vector<XidLine> xids;  // file order; event sets keep a cursor into it
};

// Parses a state file's text. A malformed line is skipped with one message on stderr naming
// `path` and the line number.
Health ParseHealth(std::string_view text, const char* path);

// Identifies one version of the state file: a rewrite changes size or mtime, a rename over it
// changes the inode (mtime alone can repeat: its clock ticks every few ms).
struct FileKey {
  bool present = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  long mtime_s = 0;
  long mtime_ns = 0;
  bool operator==(const FileKey&) const = default;
};

struct Library {
  int init_count = 0;
  int device_count = 0;
  std::string state_path;  // empty: no state file, healthy GPUs
  FileKey key;
  Health health;
};

std::mutex& Mu();
Library& Lib();  // Mu() held

// Mu() held. Re-reads the state file when it changed since the last call.
void Refresh();

// Mu() held. NVML_SUCCESS with *gpu set when `device` is one of this library's handles, the
// library is initialised and the GPU is within the device count; the state file is re-read.
// A lost GPU answers NVML_ERROR_GPU_IS_LOST.
nvmlReturn_t CheckDevice(nvmlDevice_t device, int* gpu);
nvmlDevice_t Handle(int gpu);

}  // namespace gpusim::nvml

#endif  // GPUSIM_NVML_STATE_H_

// The last step of a restore in `make bench-pull`: the pulled bytes copied to device memory
// through the CUDA runtime, as ft_restore copies a verified copy into the app's buffers. Built
// by nvcc against the real CUDA headers (device_copy.cu) like bench/ckpt_rank.cu; on this
// machine the runtime found at run time is gpusim's libcudart.so.13, on a GPU host the real one.
// One thread.
#ifndef FT_BENCH_PULL_BENCH_DEVICE_COPY_H_
#define FT_BENCH_PULL_BENCH_DEVICE_COPY_H_

#include <cstdint>
#include <string>

namespace ft::bench {

class DeviceCopy {
 public:
  DeviceCopy() = default;
  ~DeviceCopy();
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;

  // Allocates `bytes` of device memory and registers `host` with the runtime (pinned, as a
  // checkpoint arena is: registered once, never on the restore path).
  bool Open(void* host, uint64_t bytes, std::string* why);
  // The whole host buffer to the device; returns when the copy is complete.
  bool CopyToDevice(std::string* why);
  // [offset, offset + len) of the device buffer into `out`, to check what landed.
  bool ReadBack(uint64_t offset, uint64_t len, void* out, std::string* why);

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
  uint64_t bytes_ = 0;
  bool registered_ = false;
};

}  // namespace ft::bench

#endif  // FT_BENCH_PULL_BENCH_DEVICE_COPY_H_

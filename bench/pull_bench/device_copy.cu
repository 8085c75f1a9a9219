#include "bench/pull_bench/device_copy.h"

#include <cuda_runtime.h>

namespace ft::bench {
namespace {

bool Check(cudaError_t e, const char* what, std::string* why) {
  if (e == cudaSuccess) return true;
  *why = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

}  // namespace

DeviceCopy::~DeviceCopy() {
  if (registered_) cudaHostUnregister(host_);
  if (device_ != nullptr) cudaFree(device_);
}

bool DeviceCopy::Open(void* host, uint64_t bytes, std::string* why) {
  host_ = host;
  bytes_ = bytes;
  if (!Check(cudaMalloc(&device_, bytes), "cudaMalloc", why)) return false;
  // Touch the device buffer once so the timed copies see mapped memory (on gpusim it is host
  // memory; on a GPU this is where the allocation is really backed).
  if (!Check(cudaMemset(device_, 0, bytes), "cudaMemset", why)) return false;
  if (!Check(cudaHostRegister(host, bytes, cudaHostRegisterDefault), "cudaHostRegister", why)) return false;
  registered_ = true;
  return Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", why);
}

bool DeviceCopy::CopyToDevice(std::string* why) {
  return Check(cudaMemcpyAsync(device_, host_, bytes_, cudaMemcpyHostToDevice, cudaStreamPerThread),
               "cudaMemcpyAsync host to device", why) &&
         Check(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize", why);
}

bool DeviceCopy::ReadBack(uint64_t offset, uint64_t len, void* out, std::string* why) {
  if (offset > bytes_ || len > bytes_ - offset) {
    *why = "read back out of range";
    return false;
  }
  return Check(cudaMemcpy(out, static_cast<char*>(device_) + offset, len, cudaMemcpyDeviceToHost),
               "cudaMemcpy device to host", why);
}

}  // namespace ft::bench

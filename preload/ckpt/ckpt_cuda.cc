#include "preload/ckpt/ckpt_cuda.h"

#include <dlfcn.h>

#include <string>

#include "preload/ckpt/agent_host.h"

namespace ft::preload::agent {

Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  // Not in the real-function table (cudart.def lists cudaError_t functions only): the words
  // are a courtesy, the number is what counts.
  using ErrorString = const char* (*)(cudaError_t);
  auto words = reinterpret_cast<ErrorString>(dlsym(RTLD_DEFAULT, "cudaGetErrorString"));
  std::string message = std::string(what) + ": ";
  if (words != nullptr) message += words(error);
  message += " (CUDA error " + std::to_string(static_cast<int>(error)) + ")";
  return Status::IoError(message);  // the device refused, as the OS does; not a bug of ours
}

Status AgentCuda::Prepare(int device) {
  if (device < 0) return Status::Ok();
  if (device_ != device) {
    auto set = FT_HOST_CUDA(cudaSetDevice);
    if (set == nullptr) return Status::Unavailable("the CUDA runtime is not loaded");
    if (Status s = CudaStatus(set(device), "cudaSetDevice"); !s.ok()) return s;
    device_ = device;
  }
  if (!relaxed_) relaxed_ = host::RelaxCaptureMode();
  if (stream_ == nullptr) {
    auto create = FT_HOST_CUDA(cudaStreamCreateWithFlags);
    if (create == nullptr) return Status::Unavailable("cudaStreamCreateWithFlags not found");
    cudaStream_t s = nullptr;
    if (Status st = CudaStatus(create(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        !st.ok()) {
      return st;
    }
    stream_ = s;
  }
  if (events_.empty()) {
    auto create = FT_HOST_CUDA(cudaEventCreateWithFlags);
    if (create == nullptr) return Status::Unavailable("cudaEventCreateWithFlags not found");
    std::vector<cudaEvent_t> made;
    for (size_t i = 0; i < kEventWindow; ++i) {
      cudaEvent_t e = nullptr;
      if (Status st = CudaStatus(create(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
          !st.ok()) {
        return st;  // the ones made are kept alive by nobody: a few events, once
      }
      made.push_back(e);
    }
    events_ = std::move(made);
  }
  if (snapshot_event_ == nullptr) {
    auto create = FT_HOST_CUDA(cudaEventCreateWithFlags);
    if (create == nullptr) return Status::Unavailable("cudaEventCreateWithFlags not found");
    cudaEvent_t e = nullptr;
    if (Status st = CudaStatus(create(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags"); !st.ok()) {
      return st;
    }
    snapshot_event_ = e;
  }
  return Status::Ok();
}

}  // namespace ft::preload::agent

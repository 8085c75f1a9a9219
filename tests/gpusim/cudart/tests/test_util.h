// Helpers shared by the gpusim_cudart tests: gates that hold a stream's worker inside a host
// function, and the registration entry points nvcc-generated code calls (declared by hand:
// their header only compiles under nvcc).
#ifndef GPUSIM_CUDART_TESTS_TEST_UTIL_H_
#define GPUSIM_CUDART_TESTS_TEST_UTIL_H_

#include <cuda_runtime.h>  // the C++ overloads (cudaMalloc(T**, ...)) too

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

extern "C" {
void** __cudaRegisterFatBinary(void* fatbin);
void __cudaRegisterFatBinaryEnd(void** handle);
void __cudaRegisterFunction(void** handle, const char* host_fun, char* device_fun,
                            const char* device_name, int thread_limit, uint3* tid, uint3* bid,
                            dim3* bdim, dim3* gdim, int* wsize);
void __cudaRegisterVar(void** handle, char* host_var, char* device_address,
                       const char* device_name, int ext, size_t size, int constant, int global);
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_fun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                               size_t smem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                    size_t smem, cudaStream_t stream);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, cudaStream_t stream);
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* smem, void* stream);
// Per-thread default stream variants, as `nvcc --default-stream per-thread` programs call them.
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void* user);
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t n, cudaMemcpyKind kind);
}

namespace gpusim_test {

using namespace std::chrono_literals;

// A host function that blocks its stream until Open() (like a collective waiting for a peer).
class Gate {
 public:
  // Opens the gate and waits until no worker is still inside Wait(), so a test may end (and
  // the Gate die) right after opening it.
  ~Gate() {
    std::unique_lock<std::mutex> lk(mu_);
    open_ = true;
    cv_.notify_all();
    cv_.wait(lk, [&] { return inside_ == 0; });
  }
  void Open() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = true;
    cv_.notify_all();
  }
  static void CUDART_CB Fn(void* self) { static_cast<Gate*>(self)->Wait(); }
  // Blocks until a worker is inside Fn.
  void WaitEntered() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return inside_ > 0 || open_; });
  }

 private:
  void Wait() {
    std::unique_lock<std::mutex> lk(mu_);
    ++inside_;
    cv_.notify_all();
    cv_.wait(lk, [&] { return open_; });
    --inside_;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int inside_ = 0;
};

// A flag a host function sets; waiting is bounded so a broken runtime fails instead of hanging.
struct Flag {
  std::atomic<int> value{0};
  static void CUDART_CB Set(void* self) { static_cast<Flag*>(self)->value.store(1); }
  bool WaitSet(std::chrono::milliseconds limit = 5000ms) const {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!value.load()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
};

inline double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace gpusim_test

#endif  // GPUSIM_CUDART_TESTS_TEST_UTIL_H_

// Kernel launches: the calls nvcc generates for <<<>>> (push/pop of the call configuration,
// __cudaLaunchKernel with a cudaKernel_t), the public launch API, function attributes and
// occupancy. A launch copies the arguments now and runs the CPU body later on the stream.
#include <time.h>

#include <algorithm>

#include "runtime.h"

namespace gpusim {
namespace {

struct CallConfig {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
};

// <<<>>> pushes a configuration and the kernel's stub pops it; launches inside argument
// expressions nest, hence a stack.
struct ConfigStack {
  CallConfig items[16];
  int n = 0;
};
thread_local ConfigStack t_configs;

constexpr size_t kMaxDynamicSmem = 227 << 10;

cudaError_t CheckConfig(dim3 grid, dim3 block) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
    return cudaErrorInvalidConfiguration;
  if (grid.y > 65535 || grid.z > 65535 || block.x > 1024 || block.y > 1024 || block.z > 64)
    return cudaErrorInvalidConfiguration;
  if (static_cast<uint64_t>(block.x) * block.y * block.z > 1024) return cudaErrorInvalidConfiguration;
  return cudaSuccess;
}

}  // namespace

cudaError_t LaunchKernel(CUkern_st* k, dim3 grid, dim3 block, void** args, size_t smem,
                         cudaStream_t handle, bool pt) {
  if (!k || k->magic != CUkern_st::kMagic) return Ret(cudaErrorInvalidDeviceFunction);
  if (cudaError_t e = CheckConfig(grid, block)) return Ret(e);
  if (smem > kMaxDynamicSmem ||
      (smem > (48u << 10) && smem > static_cast<size_t>(k->max_dynamic_smem.load())))
    return Ret(cudaErrorInvalidValue);
  CUstream_st* s = ResolveStream(handle, pt);
  if (!s) return Ret(cudaErrorInvalidResourceHandle);
  const KernelBody* body = ResolveBody(k);
  KernelOp op{k, body, grid, block, smem, handle, {}};
  if (body && !body->sizes.empty()) {
    if (!args) return Ret(cudaErrorInvalidValue);
    // Arguments are copied now: the caller's argument array dies when the launch returns.
    std::byte* buf = op.args.Allocate(body->total);
    for (size_t i = 0; i < body->sizes.size(); ++i)
      std::memcpy(buf + body->offsets[i], args[i], body->sizes[i]);
  }
  return Ret(Enqueue(s, std::move(op)));
}

void RunKernel(const KernelOp& op, bool copy_args) {
  if (!op.body) {
    long us = GetConfig().kernel_default_us;
    if (us > 0) {
      timespec ts{us / 1000000, (us % 1000000) * 1000};
      while (nanosleep(&ts, &ts) != 0) {
      }
    }
    return;
  }
  const KernelBody& b = *op.body;
  // A graph replays the same Op many times: give the body a private copy so an argument it
  // modifies does not leak into the next replay.
  ArgBuf copy;
  std::byte* base;
  if (copy_args) {
    copy = op.args;
    base = copy.data();
  } else {
    base = const_cast<std::byte*>(op.args.data());
  }
  void* small[32];
  std::vector<void*> big;
  void** argv = small;
  if (b.sizes.size() > 32) {
    big.resize(b.sizes.size());
    argv = big.data();
  }
  for (size_t i = 0; i < b.sizes.size(); ++i) argv[i] = base + b.offsets[i];
  gpusim_launch launch{{op.grid.x, op.grid.y, op.grid.z},
                       {op.block.x, op.block.y, op.block.z},
                       op.smem,
                       op.handle};
  b.fn(&launch, argv);
}

namespace api {

cudaError_t LaunchKernelByFunc(const void* func, dim3 grid, dim3 block, void** args, size_t smem,
                               cudaStream_t s, bool pt) {
  CUkern_st* k = FindKernel(func);
  if (!k) return Ret(cudaErrorInvalidDeviceFunction);
  return LaunchKernel(k, grid, block, args, smem, s, pt);
}

cudaError_t LaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args,
                            bool pt) {
  // Launch attributes (clusters, priorities, programmatic serialisation) change nothing on a
  // CPU; only the configuration matters.
  if (!config) return Ret(cudaErrorInvalidValue);
  return LaunchKernelByFunc(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                            config->stream, pt);
}

}  // namespace api
}  // namespace gpusim

using namespace gpusim;

GPUSIM_API unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem,
                                                CUstream_st* stream) {
  ConfigStack& c = t_configs;
  if (c.n == static_cast<int>(std::size(c.items))) return 1;  // the launch is skipped
  c.items[c.n++] = CallConfig{grid, block, smem, stream};
  return 0;
}

GPUSIM_API cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* smem,
                                                  void* stream) {
  ConfigStack& c = t_configs;
  if (c.n == 0) return Ret(cudaErrorMissingConfiguration);
  const CallConfig& cc = c.items[--c.n];
  *grid = cc.grid;
  *block = cc.block;
  *smem = cc.smem;
  *static_cast<cudaStream_t*>(stream) = cc.stream;
  return cudaSuccess;
}

GPUSIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void** args,
                                          size_t smem, cudaStream_t s) {
  return LaunchKernel(k, grid, block, args, smem, s, false);
}

GPUSIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 grid, dim3 block, void** args,
                                               size_t smem, cudaStream_t s) {
  return LaunchKernel(k, grid, block, args, smem, s, true);
}

GPUSIM_API cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* func) {
  if (!a) return Ret(cudaErrorInvalidValue);
  CUkern_st* k = FindKernel(func);
  if (!k) return Ret(cudaErrorInvalidDeviceFunction);
  *a = cudaFuncAttributes{};
  a->maxThreadsPerBlock = 1024;
  a->numRegs = 32;
  a->ptxVersion = 90;
  a->binaryVersion = 90;
  a->maxDynamicSharedSizeBytes = std::max(k->max_dynamic_smem.load(), 48 << 10);
  a->preferredShmemCarveout = -1;
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  CUkern_st* k = FindKernel(func);
  if (!k) return Ret(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kMaxDynamicSmem) return Ret(cudaErrorInvalidValue);
    k->max_dynamic_smem.store(value);
  }
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaFuncSetCacheConfig(const void* func, cudaFuncCache) {
  return FindKernel(func) ? cudaSuccess : Ret(cudaErrorInvalidDeviceFunction);
}

GPUSIM_API cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t k, cudaFuncAttribute attr,
                                                       int value, int device) {
  if (!ValidDevice(device)) return Ret(cudaErrorInvalidDevice);
  return cudaFuncSetAttribute(k, attr, value);
}

GPUSIM_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* blocks, const void* func, int block_size, size_t smem, unsigned int) {
  // An H100 SM: 2048 threads, 32 blocks, 228 KB shared memory (1 KB reserved per block).
  if (!blocks || block_size <= 0) return Ret(cudaErrorInvalidValue);
  if (!FindKernel(func)) return Ret(cudaErrorInvalidDeviceFunction);
  int warps = (block_size + 31) / 32;
  int by_threads = 64 / warps;
  int by_smem = static_cast<int>((228u << 10) / (smem + (1u << 10)));
  *blocks = std::max(0, std::min({32, by_threads, by_smem}));
  return cudaSuccess;
}

GPUSIM_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func,
                                                                     int block_size, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size, smem, 0);
}

GPUSIM_API cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* smem, const void* func,
                                                                 int blocks, int) {
  if (!smem || blocks <= 0) return Ret(cudaErrorInvalidValue);
  if (!FindKernel(func)) return Ret(cudaErrorInvalidDeviceFunction);
  *smem = std::min<size_t>(kMaxDynamicSmem, (228u << 10) / blocks - (1u << 10));
  return cudaSuccess;
}

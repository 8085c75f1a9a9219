// The per-thread default stream entry points (_ptsz / _ptds) that programs built with
// `nvcc --default-stream per-thread` (or -DCUDA_API_PER_THREAD_DEFAULT_STREAM) call. With the
// macro defined, the header renames each function, so a definition written with the plain name
// below defines the _ptsz/_ptds symbol and the compiler checks it against the real prototype.
// In these, stream 0 means the calling thread's per-thread default stream.
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "runtime.h"

using namespace gpusim;

GPUSIM_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return api::Memcpy(dst, src, n, kind, true);
}
GPUSIM_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                                       cudaStream_t s) {
  return api::MemcpyAsync(dst, src, n, kind, s, true);
}
GPUSIM_API cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch,
                                    size_t width, size_t height, cudaMemcpyKind kind) {
  return api::Memcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, nullptr, true, true);
}
GPUSIM_API cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                         size_t width, size_t height, cudaMemcpyKind kind,
                                         cudaStream_t s) {
  return api::Memcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, s, true, false);
}
GPUSIM_API cudaError_t cudaMemset(void* p, int v, size_t n) {
  return api::Memset2DAsync(p, n, v, n, 1, nullptr, true, true);
}
GPUSIM_API cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s) {
  return api::Memset2DAsync(p, n, v, n, 1, s, true, false);
}
GPUSIM_API cudaError_t cudaMemset2D(void* p, size_t pitch, int v, size_t width, size_t height) {
  return api::Memset2DAsync(p, pitch, v, width, height, nullptr, true, true);
}
GPUSIM_API cudaError_t cudaMemset2DAsync(void* p, size_t pitch, int v, size_t width, size_t height,
                                         cudaStream_t s) {
  return api::Memset2DAsync(p, pitch, v, width, height, s, true, false);
}
GPUSIM_API cudaError_t cudaMemcpyToSymbol(const void* sym, const void* src, size_t n, size_t off,
                                          cudaMemcpyKind kind) {
  return api::MemcpyToSymbol(sym, src, n, off, kind, nullptr, true, true);
}
GPUSIM_API cudaError_t cudaMemcpyFromSymbol(void* dst, const void* sym, size_t n, size_t off,
                                            cudaMemcpyKind kind) {
  return api::MemcpyFromSymbol(dst, sym, n, off, kind, nullptr, true, true);
}
GPUSIM_API cudaError_t cudaMemcpyToSymbolAsync(const void* sym, const void* src, size_t n,
                                               size_t off, cudaMemcpyKind kind, cudaStream_t s) {
  return api::MemcpyToSymbol(sym, src, n, off, kind, s, true, false);
}
GPUSIM_API cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* sym, size_t n, size_t off,
                                                 cudaMemcpyKind kind, cudaStream_t s) {
  return api::MemcpyFromSymbol(dst, sym, n, off, kind, s, true, false);
}
GPUSIM_API cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t s) {
  return api::MallocAsync(p, n, s, true);
}
GPUSIM_API cudaError_t cudaMallocFromPoolAsync(void** p, size_t n, cudaMemPool_t, cudaStream_t s) {
  return api::MallocAsync(p, n, s, true);
}
GPUSIM_API cudaError_t cudaFreeAsync(void* p, cudaStream_t s) { return api::FreeAsync(p, s, true); }
GPUSIM_API cudaError_t cudaMemPrefetchAsync(const void*, size_t, cudaMemLocation, unsigned int,
                                            cudaStream_t s) {
  return api::MemPrefetchAsync(s, true);
}

GPUSIM_API cudaError_t cudaStreamQuery(cudaStream_t s) { return api::StreamQuery(s, true); }
GPUSIM_API cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  return api::StreamSynchronize(s, true);
}
GPUSIM_API cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int* flags) {
  return api::StreamGetFlags(s, flags, true);
}
GPUSIM_API cudaError_t cudaStreamGetPriority(cudaStream_t s, int* priority) {
  return api::StreamGetPriority(s, priority, true);
}
GPUSIM_API cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long* id) {
  return api::StreamGetId(s, id, true);
}
GPUSIM_API cudaError_t cudaStreamGetDevice(cudaStream_t s, int* device) {
  return api::StreamGetDevice(s, device, true);
}
GPUSIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  return api::StreamWaitEvent(s, e, flags, true);
}
GPUSIM_API cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void* user,
                                             unsigned int flags) {
  return api::StreamAddCallback(s, cb, user, flags, true);
}
GPUSIM_API cudaError_t cudaStreamAttachMemAsync(cudaStream_t s, void*, size_t, unsigned int) {
  return api::StreamAttachMemAsync(s, true);
}
GPUSIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user) {
  return api::LaunchHostFunc(s, fn, user, true);
}
GPUSIM_API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  return api::EventRecord(e, s, 0, true);
}
GPUSIM_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
  return api::EventRecord(e, s, flags, true);
}

GPUSIM_API cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args,
                                        size_t smem, cudaStream_t s) {
  return api::LaunchKernelByFunc(func, grid, block, args, smem, s, true);
}
GPUSIM_API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func,
                                           void** args) {
  return api::LaunchKernelExC(config, func, args, true);
}
GPUSIM_API cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block,
                                                   void** args, size_t smem, cudaStream_t s) {
  return api::LaunchKernelByFunc(func, grid, block, args, smem, s, true);
}

GPUSIM_API cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  return api::StreamBeginCapture(s, mode, true);
}
GPUSIM_API cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  return api::StreamEndCapture(s, g, true);
}
GPUSIM_API cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  return api::StreamIsCapturing(s, status, true);
}
GPUSIM_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, cudaStreamCaptureStatus* status,
                                                unsigned long long* id, cudaGraph_t* graph,
                                                const cudaGraphNode_t** deps,
                                                const cudaGraphEdgeData** edges, size_t* n) {
  return api::StreamGetCaptureInfo(s, status, id, graph, deps, edges, n, true);
}
GPUSIM_API cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t*,
                                                           const cudaGraphEdgeData*, size_t,
                                                           unsigned int) {
  return ResolveStream(s, true) ? cudaSuccess : Ret(cudaErrorInvalidResourceHandle);
}
GPUSIM_API cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
  return api::GraphLaunch(e, s, true);
}
GPUSIM_API cudaError_t cudaGraphUpload(cudaGraphExec_t e, cudaStream_t s) {
  return api::GraphUpload(e, s, true);
}
// Instantiation involves no stream: the _ptsz entry point forwards to the plain one.
#undef cudaGraphInstantiateWithParams
extern "C" cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t*, cudaGraph_t,
                                                      cudaGraphInstantiateParams*);
GPUSIM_API cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* out, cudaGraph_t g,
                                                           cudaGraphInstantiateParams* params) {
  return cudaGraphInstantiateWithParams(out, g, params);
}

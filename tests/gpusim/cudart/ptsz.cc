// The per-thread default stream entry points (_ptsz / _ptds) that programs built with
// `nvcc --default-stream per-thread` (or -DCUDA_API_PER_THREAD_DEFAULT_STREAM) call. With the
// macro defined, the header renames each function, so a definition written with the plain name
// defines the _ptsz/_ptds symbol and the compiler checks it against the real prototype. The
// list is stream_entry_points.def, which entry_points.cc expands into the plain twins; in these,
// stream 0 means the calling thread's per-thread default stream.
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "runtime.h"

using namespace gpusim;

#define GPUSIM_PT true
#define GPUSIM_STREAM_ENTRY(name, params, value) \
  GPUSIM_API cudaError_t name params { return value; }
#include "stream_entry_points.def"
#undef GPUSIM_STREAM_ENTRY
#undef GPUSIM_PT

// Instantiation involves no stream: the _ptsz entry point forwards to the plain one.
#undef cudaGraphInstantiateWithParams
extern "C" cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t*, cudaGraph_t,
                                                      cudaGraphInstantiateParams*);
GPUSIM_API cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* out, cudaGraph_t g,
                                                           cudaGraphInstantiateParams* params) {
  return cudaGraphInstantiateWithParams(out, g, params);
}

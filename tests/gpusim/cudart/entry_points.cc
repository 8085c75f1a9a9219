// The plain twins of the per-thread entry points (stream_entry_points.def): stream 0 is the
// legacy default stream. ptsz.cc expands the same list into the _ptsz/_ptds symbols.
#include "runtime.h"

using namespace gpusim;

#define GPUSIM_PT false
#define GPUSIM_STREAM_ENTRY(name, params, value) \
  GPUSIM_API cudaError_t name params { return value; }
#include "stream_entry_points.def"
#undef GPUSIM_STREAM_ENTRY
#undef GPUSIM_PT

// Points GPUSIM_KERNEL_LIBS at the test kernel library before anything calls the runtime
// (it reads the variable once, at the first launch), unless the caller already set it.
#include <cstdlib>

namespace {
const int kSetEnv = setenv("GPUSIM_KERNEL_LIBS", GPUSIM_TEST_KERNEL_LIB, 0);
}  // namespace

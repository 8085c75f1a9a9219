// Uses of a communicator that NCCL forbids and real NCCL does not diagnose (undefined
// behaviour there: a use-after-free, a race with the teardown): any call on a communicator after
// ncclCommDestroy/ncclCommAbort returned, and any call from another thread while one of them is
// in progress ("no other thread inside NCCL" during an abort). gpusim detects them so that a
// test can prove a program (or an interposer such as libft.so) never makes them: each one is
// counted, printed on stderr, and aborts the process under GPUSIM_NCCL_VIOLATION_ABORT=1.
#ifndef GPUSIM_NCCL_VIOLATION_H_
#define GPUSIM_NCCL_VIOLATION_H_

#include <nccl.h>

#include <cstdint>

namespace gpusim::nccl {

// fn: the API function called; what: why it is forbidden.
void Violation(const char* fn, const void* comm, const char* what);

}  // namespace gpusim::nccl

// Exported for tests (libnccl.map: gpusimNccl*). Not part of NCCL.
extern "C" {
// Violations so far in this process.
uint64_t gpusimNcclViolationCount();
// The last one's message ("" if none); valid until the next violation.
const char* gpusimNcclLastViolation();
}

#endif  // GPUSIM_NCCL_VIOLATION_H_

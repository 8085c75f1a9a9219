// Host-side fault injection of trainsim (plain C++, so what it does is exactly what the source
// says: nvcc's host front end is free to rewrite a deliberate null store).
#ifndef TRAINSIM_FAULTS_H_
#define TRAINSIM_FAULTS_H_

#include "config.h"

namespace trainsim {

// Performs a host fault: hang-host (never returns), crash-kill / crash-segv / crash-abort (the
// process dies), exit (exit(0): a clean end there), fail (exit(1): a failure through the exit
// path, as an uncaught exception), pause (busy host work for pause_s, no CUDA/NCCL call, then returns). Other kinds return at once.
void InjectHostFault(const Config& config, int rank);

// Silent data corruption of one parameter: flips one bit of v's float representation such that
// the result stays a value of the model's domain (an integer in [0, 256), so the arithmetic
// stays exact and the corruption persists as a difference of one): the lowest mantissa bit
// that weighs 1. Needs v >= 2 (a binade with two integers); false for any other v.
bool FlipParameterBit(float v, float* flipped, int* bit);

}  // namespace trainsim

#endif  // TRAINSIM_FAULTS_H_

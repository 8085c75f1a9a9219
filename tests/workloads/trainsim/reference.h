// The one-process model trainsim's ranks must agree with: the whole model, unsharded, one
// global micro-batch after another. It shares only the element functions of trainsim_math.h
// with trainsim, not its sharding, pipeline or collectives, so agreement means those are right.
#ifndef TRAINSIM_REFERENCE_H_
#define TRAINSIM_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "config.h"

namespace trainsim {

struct ReferenceResult {
  std::vector<uint64_t> rank_checksums;  // indexed by rank; DP replicas share a value
  uint64_t model_checksum = 0;           // all layers' full parameter vectors, in order
};

// config must have passed Finish().
ReferenceResult RunReference(const Config& config);

}  // namespace trainsim

#endif  // TRAINSIM_REFERENCE_H_

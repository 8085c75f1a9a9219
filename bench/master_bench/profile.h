// master_bench: the in-process profile of one size's last trial, printed as one
// `bench: profile` line. Called by the trial's thread after the master has stopped.
#pragma once

#include "bench/master_bench/layout.h"
#include "bench/master_bench/options.h"
#include "bench/master_bench/redis_backend.h"
#include "proto/keys.h"

namespace ft::bench {

// The decision's steps as ftmaster runs them, timed in this process on the master's CPU,
// against the trial's final Redis state: where the time of close_to_written goes.
void Profile(const Options& o, const Layout& layout, const proto::Keys& keys,
             const RedisBackend& backend);

}  // namespace ft::bench

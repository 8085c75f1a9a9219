// `ftworker pull`: fetch one checkpoint copy from a node's worker, verified chunk by chunk
// against its manifest, into a file — for operators (what can a replacement node get from
// node X?) and for end-to-end tests of the serving side.
//
//   ftworker pull --from NODE --region arena/<step>/<rank> --out FILE [--job J] [--redis URL]
//                 [--secret-file F] [--connections N]
//
// Reads the node's endpoint (ft:{J}:endpoints) and the job's secret (ft:{J}:transfer:secret,
// or the first line of --secret-file) from Redis, opens the region (rdma::Stat: its size and
// manifest), pulls it (rdma::Pull, every chunk verified), and writes FILE (the data region) and
// FILE.manifest (the manifest's bytes), each by temp file and rename: nothing is written unless
// every chunk verified.
#ifndef FT_FTWORKER_PULL_COMMAND_H_
#define FT_FTWORKER_PULL_COMMAND_H_

#include <string>

#include "redis/url.h"

namespace ft::worker {

struct PullCommand {
  std::string job;
  std::string from;         // node
  std::string region;       // "arena/<step>/<rank>" or "local/<step>/<rank>"
  std::string out;          // file
  std::string secret_file;  // empty: the secret in Redis
  int connections = 4;
  uint64_t min_bytes_per_second = 1ull << 20;  // FT_PULL_MIN_RATE
  redis::Endpoint redis;
};

// Prints one result line on stdout, or the reason on stderr; returns the exit status (0 ok,
// 1 the pull failed, 2 bad arguments or setup).
int RunPull(const PullCommand& command);

}  // namespace ft::worker

#endif  // FT_FTWORKER_PULL_COMMAND_H_

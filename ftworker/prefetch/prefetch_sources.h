// The prefetcher's reading of a restore plan: who serves copies (the job's secret, the workers'
// transfer endpoints, the evicted nodes, as Redis has them) and, for one rank's line of the plan,
// the copies on other nodes to pull from, in order, and the copies this node itself holds.
// Plain values and pure functions, except ReadPrefetchPeers (Redis, the daemon's thread).
#ifndef FT_FTWORKER_PREFETCH_SOURCES_H_
#define FT_FTWORKER_PREFETCH_SOURCES_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "proto/transfer_codec.h"
#include "redis/store.h"
#include "transfer_engine/transfer.h"

namespace ft::worker {

// Who serves copies, as last read from Redis.
struct PrefetchPeers {
  std::string secret;
  std::map<std::string, proto::TransferEndpoint> endpoints;  // by node (sanitized)
  std::set<std::string> evicted;                             // nodes (sanitized)
};

// The secret, endpoints and evicted nodes; false when Redis did not answer. An endpoint that
// does not parse is left out, said in the log.
bool ReadPrefetchPeers(redis::Commands& redis, const proto::Keys& keys, PrefetchPeers* out);

// What pulling one rank takes.
struct RankWork {
  int rank = -1;
  uint64_t digest = 0;
  rdma::PullOptions pull;                 // with the job's secret as last read
  std::vector<rdma::PullSource> sources;  // copies on other nodes, the plan's order
  std::vector<std::string> left_out;      // plan sources not pulled from, and why
  std::vector<int> same_node_ranks;       // plan copies on this node
  std::vector<int> same_node_replicas;    // plan buddy copies this node holds (ft-replica arenas)
  std::vector<int> remote_ranks;          // plan copies in the remote directory
};

// `line`'s sources on other nodes that serve, in the plan's order (the master orders them to
// spread the pulls), those on evicted nodes after all others; in each node its arena and buddy
// copy (memory) before its local tier (a disk). `here` is this node, sanitized; `pull` the
// pull options the secret is added to.
RankWork ChooseSources(const proto::RestoreRank& line, int64_t step, const PrefetchPeers& peers,
                       std::string_view here, const rdma::PullOptions& pull);

// What this node's ranks need of `plan`: "" when nothing (no step, no line for any of them).
// Two plans with the same key need the same copies: the step and these ranks' digests.
std::string PlanKey(const proto::RestorePlan& plan, const std::vector<int>& ranks);

}  // namespace ft::worker

#endif  // FT_FTWORKER_PREFETCH_SOURCES_H_

#include "ftworker/prefetch/prefetch_sources.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/log.h"
#include "ftworker/transfer/region_name.h"
#include "jitckpt/checksum.h"
#include "schema/node_hashes.h"
#include "schema/node_sets.h"
#include "schema/published.h"

namespace ft::worker {

namespace {

bool HasTier(const proto::RestoreSource& source, std::string_view tier) {
  return std::find(source.tiers.begin(), source.tiers.end(), tier) != source.tiers.end();
}

}  // namespace

bool ReadPrefetchPeers(redis::Commands& redis, const proto::Keys& keys, PrefetchPeers* out) {
  redis::Reply secret, endpoints, evicted;
  if (!redis.Run(schema::GetTransferSecret(keys), &secret).ok() ||
      !redis.Run(schema::GetEndpoints(keys), &endpoints).ok() ||
      !redis.Run(schema::GetEvicted(keys), &evicted).ok()) {
    return false;
  }
  out->secret = secret.is_string() ? secret.str() : "";
  out->endpoints.clear();
  std::vector<schema::HashValue<proto::TransferEndpoint>> published;
  (void)schema::DecodeEndpoints(endpoints, &published);  // a reply that is no hash publishes none
  for (auto& e : published) {
    if (!e.ok()) {
      FT_LOG(Warn, Worker, "the transfer endpoint of node {} in {} is unreadable: {}; not pulling from it",
             e.field, keys.Endpoints(), e.why.message());
      continue;
    }
    out->endpoints[proto::SanitizeName(e.field)] = std::move(e.value);
  }
  out->evicted.clear();
  for (const redis::Reply& node : evicted.elements()) {
    if (node.is_string()) out->evicted.insert(proto::SanitizeName(node.str()));
  }
  return true;
}

RankWork ChooseSources(const proto::RestoreRank& line, int64_t step, const PrefetchPeers& peers,
                       std::string_view here, const rdma::PullOptions& pull) {
  RankWork work;
  work.rank = line.rank;
  work.digest = line.digest;
  work.pull = pull;
  work.pull.secret = peers.secret;
  // An evicted node's copies come after every healthy node's: the master keeps them in the
  // plan while that node's worker still serves (a shard with no other replica), but the node
  // just failed. Its bytes are verified like any other's.
  std::vector<rdma::PullSource> evicted_sources;
  for (const proto::RestoreSource& source : line.sources) {
    const std::string node = proto::SanitizeName(source.node);
    if (node == here) {
      if (HasTier(source, "replica")) work.same_node_replicas.push_back(source.rank);
      if (HasTier(source, "arena") || HasTier(source, "local")) work.same_node_ranks.push_back(source.rank);
      continue;
    }
    // The remote directory is shared: a copy there is readable whatever became of its node.
    if (HasTier(source, "remote")) work.remote_ranks.push_back(source.rank);
    if (!HasTier(source, "arena") && !HasTier(source, "local") && !HasTier(source, "replica")) continue;
    auto endpoint = peers.endpoints.find(node);
    if (endpoint == peers.endpoints.end()) {
      work.left_out.push_back(fmt::format("rank {} on {}: its worker published no transfer endpoint",
                                          source.rank, node));
      continue;
    }
    const rdma::Peer peer{source.node, endpoint->second.address, endpoint->second.port};
    // The arena (memory) and a buddy copy (memory) before the local tier (a disk) of the same node.
    std::vector<rdma::PullSource>& into = peers.evicted.contains(node) ? evicted_sources : work.sources;
    for (CopyPlace place : {CopyPlace::kArena, CopyPlace::kReplica, CopyPlace::kLocal}) {
      if (HasTier(source, CopyPlaceName(place))) {
        into.push_back({peer, FormatRegionName(place, step, source.rank)});
      }
    }
  }
  work.sources.insert(work.sources.end(), evicted_sources.begin(), evicted_sources.end());
  return work;
}

std::string PlanKey(const proto::RestorePlan& plan, const std::vector<int>& ranks) {
  if (plan.step < 0) return "";
  std::string key;
  for (const proto::RestoreRank& line : plan.ranks) {
    if (std::binary_search(ranks.begin(), ranks.end(), line.rank)) {
      key += fmt::format(" {}={}", line.rank, ckpt::DigestHex(line.digest));
    }
  }
  return key.empty() ? "" : fmt::format("step {}:{}", plan.step, key);
}

}  // namespace ft::worker

// Bringing up the verbs fast path from the configuration, for ftworker: loads libibverbs,
// opens the device and makes the server and client hooks (transfer_engine/verbs/verbs_transport.h)
// to hand to the engine's ServerOptions::fast_path and PullOptions::fast_path. Any failure is an
// Unavailable saying why (FT_RDMA_VERBS=0, no libibverbs, no device, port down): the caller
// logs it once and runs on TCP alone.
#ifndef FT_TRANSFER_ENGINE_VERBS_VERBS_SETUP_H_
#define FT_TRANSFER_ENGINE_VERBS_VERBS_SETUP_H_

#include <memory>

#include "common/config.h"
#include "common/status.h"
#include "transfer_engine/verbs/verbs_transport.h"

namespace ft::rdma {

VerbsOptions VerbsOptionsFromConfig(const Config& config);

struct VerbsTransport {
  std::shared_ptr<VerbsDevice> device;
  std::unique_ptr<VerbsServer> server;  // serve: register arenas with server->Register when created
  std::unique_ptr<VerbsClient> client;  // pull: register prefetch arenas with client->Register
};

// `api` null: the real libibverbs (LoadVerbs); tests pass a fake table.
Status OpenVerbsTransport(const Config& config, const VerbsApi* api, VerbsTransport* out);

}  // namespace ft::rdma

#endif  // FT_TRANSFER_ENGINE_VERBS_VERBS_SETUP_H_

// ft::schema published values: what the leading master publishes for every worker as one JSON
// value with its version in a key beside it, and the notice that tells the workers it moved. A
// worker polls the version (one short GET) and reads the value only when it changed.
//
//   value                         written by (behind the fence)   read by
//   restore, restore:version      the master's checkpoint round    the workers' plan sync and
//   (proto::RestorePlan)          (PublishPlan)                    arena sweep, a new term, the
//                                                                  page, `ftmaster checkpoints`
//                                                                  and `incidents`
//   timeouts, timeouts:version    the master's summary round       the workers, a new term, the
//   (proto::TimeoutTable)         (PublishTimeouts)                metrics, `ftmaster status`
//                                                                  and `timeouts`
//   transfer:secret (hex; no      the leading master, once         the workers' transfer
//   version: it never changes     (PublishTransferSecret)          service, replicator and
//   while it exists)                                               prefetch, `ftworker pull`
//
// The version is the value's own `version` in decimal, written in the same batch. Readers take
// the GET replies as foreign bytes and decode them with proto's codec (a nil: never published,
// or Redis lost it). Pure: the caller runs the argv.
#ifndef FT_SCHEMA_PUBLISHED_H_
#define FT_SCHEMA_PUBLISHED_H_

#include <string>
#include <vector>

#include "proto/ckpt_codec.h"
#include "proto/keys.h"
#include "proto/messages.h"
#include "redis/store.h"

namespace ft::schema {

// The makers: the value, its version and the notice, for one batch (the master's fenced writer).
std::vector<redis::Argv> PublishPlan(const proto::Keys& keys, const proto::RestorePlan& plan);
std::vector<redis::Argv> PublishTimeouts(const proto::Keys& keys, const proto::TimeoutTable& table);

// The job's transfer secret, only where none exists (SET NX: a master that raced another keeps
// the other's), and the notice. The secret is never logged; neither are these argv.
std::vector<redis::Argv> PublishTransferSecret(const proto::Keys& keys, const std::string& secret);

// The readers: GET of the value, GET of its version.
redis::Argv GetPlan(const proto::Keys& keys);
redis::Argv GetPlanVersion(const proto::Keys& keys);
redis::Argv GetTimeouts(const proto::Keys& keys);
redis::Argv GetTimeoutsVersion(const proto::Keys& keys);
redis::Argv GetTransferSecret(const proto::Keys& keys);
redis::Argv TransferSecretLength(const proto::Keys& keys);  // STRLEN: whether it exists, without its bytes

}  // namespace ft::schema

#endif  // FT_SCHEMA_PUBLISHED_H_

#include "schema/published.h"

#include <string>

#include "proto/codec.h"
#include "proto/notice.h"
#include "schema/streams.h"

namespace ft::schema {

std::vector<redis::Argv> PublishPlan(const proto::Keys& keys, const proto::RestorePlan& plan) {
  return {{"SET", keys.Restore(), proto::Encode(plan)},
          {"SET", keys.RestoreVersion(), std::to_string(plan.version)},
          PostNotice(keys, proto::NoticeOf(proto::NoticeKind::kRestore))};
}

std::vector<redis::Argv> PublishTimeouts(const proto::Keys& keys, const proto::TimeoutTable& table) {
  return {{"SET", keys.Timeouts(), proto::Encode(table)},
          {"SET", keys.TimeoutsVersion(), std::to_string(table.version)},
          PostNotice(keys, proto::NoticeOf(proto::NoticeKind::kTimeouts))};
}

std::vector<redis::Argv> PublishTransferSecret(const proto::Keys& keys, const std::string& secret) {
  return {{"SET", keys.TransferSecret(), secret, "NX"},
          PostNotice(keys, proto::NoticeOf(proto::NoticeKind::kSecret))};
}

redis::Argv GetPlan(const proto::Keys& keys) { return {"GET", keys.Restore()}; }
redis::Argv GetPlanVersion(const proto::Keys& keys) { return {"GET", keys.RestoreVersion()}; }
redis::Argv GetTimeouts(const proto::Keys& keys) { return {"GET", keys.Timeouts()}; }
redis::Argv GetTimeoutsVersion(const proto::Keys& keys) { return {"GET", keys.TimeoutsVersion()}; }
redis::Argv GetTransferSecret(const proto::Keys& keys) { return {"GET", keys.TransferSecret()}; }
redis::Argv TransferSecretLength(const proto::Keys& keys) { return {"STRLEN", keys.TransferSecret()}; }

}  // namespace ft::schema

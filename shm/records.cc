#include "shm/records.h"

#include <fmt/format.h>

namespace ft::shm {

std::string OpKindName(uint32_t op_kind) {
  switch (static_cast<OpKind>(op_kind)) {
    case OpKind::kNone: return "none";
    case OpKind::kAllReduce: return "allreduce";
    case OpKind::kAllGather: return "allgather";
    case OpKind::kReduceScatter: return "reducescatter";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kBcast: return "bcast";
    case OpKind::kReduce: return "reduce";
    case OpKind::kAlltoAll: return "alltoall";
    case OpKind::kGather: return "gather";
    case OpKind::kScatter: return "scatter";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kGraphLaunch: return "graphlaunch";
  }
  return fmt::format("op{}", op_kind);
}

}  // namespace ft::shm

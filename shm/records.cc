#include "shm/records.h"

namespace ft::shm {

const char* OpKindName(OpKind op) {
  switch (op) {
    case OpKind::kNone: return "none";
    case OpKind::kAllReduce: return "AllReduce";
    case OpKind::kAllGather: return "AllGather";
    case OpKind::kReduceScatter: return "ReduceScatter";
    case OpKind::kBroadcast: return "Broadcast";
    case OpKind::kBcast: return "Bcast";
    case OpKind::kReduce: return "Reduce";
    case OpKind::kAlltoAll: return "AlltoAll";
    case OpKind::kGather: return "Gather";
    case OpKind::kScatter: return "Scatter";
    case OpKind::kSend: return "Send";
    case OpKind::kRecv: return "Recv";
    case OpKind::kGraphLaunch: return "GraphLaunch";
  }
  return "?";
}

}  // namespace ft::shm

// A synthetic job for ftmaster's tests: a tp x dp x pp grid (Megatron order tp-dp-pp), one
// communicator per tp, dp and pp group (pp rows are p2p), membership and progress tables
// that say "everyone idle after op 10", and setters to build a scenario on top.
#ifndef FT_FTMASTER_TESTS_JOB_FIXTURE_H_
#define FT_FTMASTER_TESTS_JOB_FIXTURE_H_

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "proto/messages.h"

namespace ft::master::testing {

class Job {
 public:
  static constexpr int64_t kNow = 1'700'000'000'000;
  static constexpr uint64_t kIdle = 10;

  Job(int tp, int dp, int pp, int ranks_per_node = 8) : tp_(tp), dp_(dp), pp_(pp) {
    const int world = tp * dp * pp;
    membership.resize(static_cast<size_t>(world));
    progress.resize(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      proto::Membership& m = membership[static_cast<size_t>(r)];
      m.rank = r;
      m.local_rank = r % ranks_per_node;
      m.world_size = world;
      m.node = fmt::format("n{}", r / ranks_per_node);
      m.state = "running";
      proto::RankProgress& p = progress[static_cast<size_t>(r)];
      p.rank = r;
      p.node = m.node;
      p.state = "running";
      p.observed_unix_ms = kNow - 100;
      p.last_call_age_ms = 5000;
      p.cpu_pct = 1;
      const int t = r % tp, d = (r / tp) % dp, s = r / (tp * dp);
      if (tp > 1) AddComm(r, TpComm(d, s), false, t, tp);
      if (dp > 1) AddComm(r, DpComm(t, s), false, d, dp);
      if (pp > 1) AddComm(r, PpComm(t, d), true, s, pp);
    }
  }

  int world() const { return tp_ * dp_ * pp_; }
  int Rank(int t, int d, int s) const { return t + tp_ * (d + dp_ * s); }
  uint64_t TpComm(int d, int s) const { return 0x7100000000000000ULL + static_cast<uint64_t>(d + dp_ * s); }
  uint64_t DpComm(int t, int s) const { return 0x7200000000000000ULL + static_cast<uint64_t>(t + tp_ * s); }
  uint64_t PpComm(int t, int d) const { return 0x7300000000000000ULL + static_cast<uint64_t>(t + tp_ * d); }

  proto::CommRow& Row(int rank, uint64_t comm) {
    for (proto::CommRow& row : progress[static_cast<size_t>(rank)].comms) {
      if (row.comm_id == comm) return row;
    }
    throw std::runtime_error(fmt::format("rank {} has no row for comm {:x}", rank, comm));
  }
  proto::RankProgress& Progress(int rank) { return progress[static_cast<size_t>(rank)]; }

  // Sets a row's sequence numbers; the GPU reached its last op `age_ms` ago.
  void Set(int rank, uint64_t comm, uint64_t entered, uint64_t started, uint64_t completed,
           double age_ms = 5000, proto::OpKind op = proto::OpKind::kNone, int64_t peer = -1) {
    proto::CommRow& row = Row(rank, comm);
    row.entered_seq = entered;
    row.started_seq = started;
    row.completed_seq = completed;
    row.entered_age_ms = age_ms;
    row.started_age_ms = age_ms;
    row.completed_age_ms = age_ms + 10;
    if (op != proto::OpKind::kNone) row.op = op;
    if (peer >= 0) row.peer = peer;
  }

  std::vector<proto::Membership> membership;
  std::vector<proto::RankProgress> progress;

 private:
  void AddComm(int rank, uint64_t comm, bool p2p, int comm_rank, int comm_size) {
    membership[static_cast<size_t>(rank)].comms.push_back(
        proto::CommMember{comm, p2p, comm_rank, comm_size});
    proto::CommRow row;
    row.comm_id = comm;
    row.p2p = p2p;
    row.comm_rank = comm_rank;
    row.comm_size = comm_size;
    row.op = p2p ? proto::OpKind::kSend : proto::OpKind::kAllReduce;
    row.bytes = 1 << 20;
    row.entered_seq = row.started_seq = row.completed_seq = kIdle;
    row.entered_age_ms = row.started_age_ms = 60;
    row.completed_age_ms = 50;
    progress[static_cast<size_t>(rank)].comms.push_back(row);
  }

  int tp_, dp_, pp_;
};

}  // namespace ft::master::testing

#endif  // FT_FTMASTER_TESTS_JOB_FIXTURE_H_

// ft::rdma::testing::FakeVerbs: a simulated RDMA fabric in one process behind a VerbsApi
// table, so the verbs transport's logic is tested on machines without a NIC.
//
// Devices "fake0", "fake1", ... each have one port (LID 1 + index, GIDs fe80::<index>:<gid
// index>). Memory regions are host memory; an RDMA READ posted on an RC QP connected to a
// peer QP copies from the peer's MR into the local MR and yields a completion. The NIC's rules
// are checked as a real one would: QP transitions RESET -> INIT -> RTR -> RTS with exactly the
// required (and allowed optional) attribute masks; posting on a QP not in RTS fails (in ERR it
// is flushed); a full send queue refuses the post; rkeys, lkeys, bounds, access flags, PSNs
// and addressing are checked at execution and give error completions; registration pins the
// pages: an MR over a file mapping (an arena) whose address now maps other pages moves the
// bytes between the pinned pages, invisible here, and completes successfully (stale_reads);
// an error completion moves the QP to ERR and flushes what it still had queued. Work makes
// progress when the CQ is polled (reads_per_poll requests per QP per poll), so reads really
// are outstanding.
//
// Fault injection: an error completion on the Nth read, a QP going to the error state after N
// reads, reads that stall. One FakeVerbs may exist at a time (the table's plain function
// pointers find it through a global). All entries are thread-safe (one mutex).
#ifndef FT_TRANSFER_ENGINE_VERBS_TESTS_FAKE_VERBS_H_
#define FT_TRANSFER_ENGINE_VERBS_TESTS_FAKE_VERBS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transfer_engine/verbs/verbs_api.h"

namespace ft::rdma::testing {

struct FakeNicConfig {
  int devices = 2;
  int device_list_errno = 0;  // non-zero: ibv_get_device_list fails with it (no kernel support)
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  ibv_port_state port_state = IBV_PORT_ACTIVE;
  ibv_mtu mtu = IBV_MTU_4096;
  uint64_t max_mr_size = 1ull << 40;
  int max_qp_wr = 1024;
  int max_qp_rd_atom = 16;
  int max_cqe = 1 << 16;
  uint32_t max_msg_sz = 1u << 31;
  int gid_table_len = 4;
  int reads_per_poll = 1;
};

class FakeVerbs {
 public:
  explicit FakeVerbs(FakeNicConfig config = {});
  ~FakeVerbs();
  FakeVerbs(const FakeVerbs&) = delete;
  FakeVerbs& operator=(const FakeVerbs&) = delete;

  const VerbsApi& api() const;

  // ---- fault injection (counted over reads executed from now on, 1-based) ----
  void FailNthRead(uint64_t n, ibv_wc_status status);
  // After n more reads, the QP that would execute the next read goes to ERR instead (a fatal
  // QP event): everything queued on it completes with IBV_WC_WR_FLUSH_ERR.
  void BreakQpAfterReads(uint64_t n);
  void HoldReads(bool hold);  // true: queued reads make no progress

  // ---- observations ----
  struct QpView {
    ibv_qp_state state = IBV_QPS_RESET;
    ibv_qp_attr attr{};       // the attributes the last transitions set
    int access = 0;           // qp_access_flags
    uint32_t max_send_wr = 0;
    uint32_t most_queued = 0;  // largest number of reads queued at once
    uint32_t reads = 0;        // reads executed on this QP
  };
  std::vector<uint32_t> qp_nums() const;  // live QPs, in creation order
  QpView qp(uint32_t qp_num) const;
  std::vector<std::string> transitions() const;  // "qp 17 RESET->INIT", and refused ones "... refused: why"
  uint64_t reads_executed() const;
  uint64_t registrations() const;  // reg_mr calls that succeeded, ever
  uint64_t stale_reads() const;    // reads through an MR whose mapping was replaced
  size_t live_mrs() const;
  size_t live_objects() const;     // contexts, PDs, MRs, CQs, QPs not yet released
  bool cq_overrun() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace ft::rdma::testing

#endif  // FT_TRANSFER_ENGINE_VERBS_TESTS_FAKE_VERBS_H_

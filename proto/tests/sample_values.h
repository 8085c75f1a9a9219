// One value of every proto struct with every field set to something other than its default,
// shared by the round-trip and fuzz tests.
#ifndef FT_PROTO_TESTS_SAMPLE_VALUES_H_
#define FT_PROTO_TESTS_SAMPLE_VALUES_H_

#include "proto/ckpt_codec.h"
#include "proto/prefetch_codec.h"
#include "proto/master_codec.h"
#include "proto/messages.h"
#include "proto/node_history_codec.h"
#include "proto/transfer_codec.h"

namespace ft::proto::testing {

inline CommRow SampleCommRow(int i) {
  CommRow r;
  r.comm_id = 0x3fa2c0ffee000000ULL + static_cast<uint64_t>(i);
  r.p2p = i % 2 == 1;
  r.comm_rank = 3 + i;
  r.comm_size = 8;
  r.op = i % 2 ? proto::OpKind::kSend : proto::OpKind::kAllReduce;
  r.bytes = (uint64_t{1} << 40) + 7;
  r.peer = 5;
  r.entered_seq = 812 + static_cast<uint64_t>(i);
  r.started_seq = 811;
  r.completed_seq = 810;
  r.entered_age_ms = 2100.25;
  r.started_age_ms = 2000.5;
  r.completed_age_ms = 0.125;
  return r;
}

inline RankProgress SampleProgress() {
  RankProgress p;
  p.rank = 5;
  p.node = "node1";
  p.pid = 4242;
  p.incarnation = 1763800000123456789ULL;
  p.state = "running";
  p.observed_unix_ms = 1763800000123;
  p.last_call_age_ms = 12.5;
  p.blocked_ms = 2000;
  p.cpu_pct = 99.5;
  p.busy = true;
  p.proc_state = "T";
  p.heartbeat_age_ms = 4500;
  p.frozen = true;
  p.comms = {SampleCommRow(0), SampleCommRow(1), SampleCommRow(2)};
  return p;
}

inline HwSignal SampleHwSignal() {
  HwSignal h;
  h.node = "node1";
  h.source = "nvml";
  h.device = "0000:3b:00.0";
  h.kind = "xid";
  h.value = 79;
  h.total = 3;
  h.critical = true;
  h.ranks = {5, 6};
  h.pid = 4242;
  h.unix_ms = 1763800000100;
  h.detail = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.";
  return h;
}

inline Event SampleEvent() {
  Event e;
  e.kind = "timeout";
  e.rank = 5;
  e.node = "node1";
  e.unix_ms = 1763800000200;
  e.message = "allreduce #812 on comm 3fa2.. waited 2.1 s; see ftmaster incidents";
  e.comm_id = 0xffffffffffffffffULL;
  e.op = proto::OpKind::kAllReduce;
  e.seq = 812;
  e.age_ms = 2100.5;
  e.timeout_ms = 2000;
  e.started = true;
  e.api = "nccl";
  e.call = "ncclAllReduce";
  e.code = -9;
  e.clean = true;
  e.step_ms = 1000.5;
  e.baseline_ms = 900.25;
  e.compute_ms = 700.75;
  e.progress = SampleProgress();
  e.hw = SampleHwSignal();
  return e;
}

inline RankSummary SampleSummary() {
  RankSummary s;
  s.rank = 7;
  s.node = "node2";
  s.unix_ms = 1763800000300;
  s.steps = 12345;
  s.step_ms = 1001.5;
  s.step_p50_ms = 1000.25;
  s.compute_ms = 800.5;
  s.comm_wait_ms = 200.75;
  s.records = 99999999999ULL;
  s.dropped = 3;
  for (int i = 0; i < 3; ++i) {
    OpSummary o;
    o.comm_id = 0x0123456789abcdefULL + static_cast<uint64_t>(i);
    o.op = proto::OpKind::kReduceScatter;
    o.bucket = i + 1;
    o.count = 100 + static_cast<uint64_t>(i);
    o.p50_ms = 1.5;
    o.p99_ms = 9.75;
    o.max_ms = 12.125;
    o.last_seq = 4000;
    s.ops.push_back(o);
  }
  s.kernels = 4242;
  s.kernel_samples.push_back(KernelSummary{"_Z7computePfi", 12, 3.25, 7.5});
  s.declared_step = 150;
  s.total_steps = 1000;
  return s;
}

inline Membership SampleMembership() {
  Membership m;
  m.rank = 9;
  m.local_rank = 1;
  m.world_size = 16;
  m.node = "node3";
  m.host = "gpu-host-3.example";
  m.pid = 777;
  m.incarnation = 42;
  m.state = "exited";
  m.unix_ms = 1763800000400;
  m.comms = {{0xabcULL, true, 1, 2}, {0xdefULL, false, 3, 16}};
  m.step = 1199;
  return m;
}

inline TimeoutTable SampleTimeouts() {
  TimeoutTable t;
  t.version = 17;
  t.default_ms = 30000;
  t.unix_ms = 1763800000500;
  t.entries = {{0x1ULL, OpKind::kAllReduce, 2, 1500.5}, {0x2ULL, OpKind::kAllGather, 4, 9000}};
  return t;
}

inline Command SampleCommand() {
  Command c;
  c.id = "incident-3/save";
  c.kind = "save";
  c.rank = 4;
  c.text = "save now";
  c.grace_s = 2.5;
  c.unix_ms = 1763800000600;
  c.incarnations = {{4, 1763799990123456789ull}};
  c.decided_unix_ms = 1763800000100;
  return c;
}

inline CommandAck SampleAck() {
  CommandAck a;
  a.id = "incident-3/save";
  a.node = "node1";
  a.rank = 4;
  a.result = "failed";
  a.message = "no state registered";
  a.unix_ms = 1763800000700;
  return a;
}

inline Incident SampleIncident() {
  Incident i;
  i.id = "inc-1";
  i.kind = "transport-hang";
  i.suspects = {{5, "node1", "never reached allreduce #812"}, {6, "node2", "dead"}};
  i.comm_id = 0x3fa2ULL;
  i.evidence = {"rank 3 waits on allreduce #812", "rank 4 waits too"};
  i.hardware = {SampleHwSignal()};
  i.hardware_checked = true;
  i.confidence = 0.875;
  i.first_event_unix_ms = 1763800000000;
  i.window_closed_unix_ms = 1763800000950;
  i.decided_unix_ms = 1763800001500;
  i.decide_ms = 1500.5;
  i.decision = "save-then-stop";
  i.evicted = {{"node1", "a transport hang across nodes: link-downed on mlx5_0/1"}};
  i.message = "stopping the job";
  return i;
}

inline WorkerHeartbeat SampleHeartbeat() {
  WorkerHeartbeat h;
  h.node = "node1";
  h.host = "gpu-host-1";
  h.pid = 31337;
  h.ranks = {0, 1, 2, 3};
  h.unix_ms = 1763800000800;
  return h;
}

inline MasterAction SampleAction() {
  MasterAction a;
  a.incident = "1763800000000-hang";
  a.decision = DecisionKind::kSaveThenStop;
  a.save = {{3, "node-a"}, {7, ""}};
  a.phase = ActionPhase::kStop;
  a.sent = true;
  a.acks_from = "1763800000100-0";
  a.deadline_unix_ms = 1763800030000;
  a.nodes = {"node-a", "node-b"};
  a.decided_unix_ms = 1763800000900;
  return a;
}

inline OpenIncident SampleOpenIncident() {
  OpenIncident o;
  o.first_event_id = "1763800000000-3";
  o.first_event_unix_ms = 1763800000000;
  o.opened_unix_ms = 1763800000020;
  o.outcomes = 2;
  o.last_outcome = "busy:3,5";
  o.watching = true;
  return o;
}

inline Goodput SampleGoodput() {
  Goodput g;
  g.since_unix_ms = 1763800000000;
  g.last_unix_ms = 1763800090000;
  g.rank_s = {480, 40, 24, 8, 12, 16, 20, 4};
  g.wall_s = {60, 5, 3, 1, 1.5, 2, 2.5, 0.5};
  g.phase = GoodputCause::kRedone;
  g.furthest_step = 120;
  g.redo_until_step = 100;
  g.redo_left_s = 3.5;
  g.launch_incarnation = 1;
  g.incarnation = 2;
  g.stepping = true;
  g.normal_step_ms = 250.5;
  GoodputIncident i;
  i.id = "1763800030000-hang";
  i.fault_unix_ms = 1763800029000;
  i.rank_s = {0, 40, 24, 8, 12, 16, 0, 0};
  i.open = true;
  g.incidents = {i};
  return g;
}

inline CkptCopy SampleCkptCopy() {
  CkptCopy c;
  c.step = 1200;
  c.rank = 5;
  c.node = "node1";
  c.tp = 1;
  c.pp = 0;
  c.dp = 2;
  c.digest = 0xfedcba9876543210ULL;
  c.torn = true;
  c.origin = "termination";
  c.bytes = (uint64_t{1} << 40) + 3;
  c.tiers = {"arena", "local", "remote"};
  c.error = "local: No space left on device";
  c.unix_ms = 1763800001000;
  c.saved_unix_ms = 1763800000900;
  return c;
}

inline CkptRewinds SampleRewinds() {
  CkptRewinds r;
  r.rewinds = {{30, 1763800000000, "a relaunch restored step 30"}, {-1, 1763800009000, "the job finished"}};
  return r;
}

inline StepVerdict SampleVerdict() {
  StepVerdict v;
  v.step = 1200;
  v.state = VerdictState::kVerified;
  v.shards = 4;
  v.verified_shards = 4;
  v.copies = 7;
  v.sdc_ranks = {3, 9};
  v.why = "4/4 shards verified; rank 3 disagrees with its 2 replicas";
  v.unix_ms = 1763800001100;
  return v;
}

inline RestorePlan SamplePlan() {
  RestorePlan p;
  p.version = 3;
  p.step = 1200;
  for (int r = 0; r < 2; ++r) {
    RestoreRank rr;
    rr.rank = r;
    rr.digest = 0x0123456789abcdefULL + static_cast<uint64_t>(r);
    rr.sources = {{r, "node0", {"arena", "local"}}, {r + 2, "node1", {"remote"}}};
    p.ranks.push_back(rr);
  }
  p.unix_ms = 1763800001200;
  p.ends_seen = {{"node0", 1763800001100}, {"node1", 1763800001150}};
  return p;
}

inline PrefetchReport SamplePrefetch() {
  PrefetchReport p;
  p.node = "node2";
  p.step = 1200;
  p.state = PrefetchState::kDone;
  p.started_unix_ms = 1763800002000;
  p.done_unix_ms = 1763800003500;
  p.pull_s = 1.5;
  PrefetchRank pulled{4, PrefetchOutcome::kPulled, true, 67108864, 1.25, "node0", 0, "tcp", ""};
  PrefetchRank failed{5, PrefetchOutcome::kFailed, false, 0, 0.5, "", -1, "", "no source on another node answered"};
  PrefetchRank local{6, PrefetchOutcome::kLocal, true, 0, 0, "", -1, "", ""};
  p.ranks = {pulled, failed, local};
  return p;
}

inline TransferEndpoint SampleEndpoint() {
  TransferEndpoint e;
  e.node = "node1";
  e.address = "10.1.2.3";
  e.port = 45123;
  e.transports = {"verbs", "tcp"};
  e.unix_ms = 1763800002000;
  return e;
}

inline NodeRecord SampleNodeRecord() {
  NodeRecord r;
  r.kind = NodeRecordKind::kEvicted;
  r.node = "node1";
  r.job = "llama-70b";
  r.incident = "1763800000000-hang-5";
  r.incident_kind = "hang";
  r.unix_ms = 1763800001500;
  r.rank = 5;
  r.nodes = 3;
  r.detail = "a hang suspect";
  return r;
}

inline CordonEntry SampleCordon() {
  CordonEntry c;
  c.node = "node1";
  c.reason = "lemon: evicted by 2 jobs this week";
  c.unix_ms = 1763800002000;
  c.until_unix_ms = 1763886402000;
  c.by = "ops@ctl-1";
  return c;
}

}  // namespace ft::proto::testing

#endif  // FT_PROTO_TESTS_SAMPLE_VALUES_H_

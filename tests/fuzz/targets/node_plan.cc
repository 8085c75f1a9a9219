// The restore plan file ft_restore reads from its node's arena directory (jitckpt/node_plan.h,
// ParseNodePlan): hostile text gives Ok or an explained error; what parses re-encodes to a
// plan equal to itself.
#include "jitckpt/node_plan.h"
#include "jitckpt/tests/sample_node_plan.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ft;
  using namespace ft::ckpt;
  const std::string text(reinterpret_cast<const char*>(data), size);
  NodePlan out;
  out.job = "sentinel";
  Status s = ParseNodePlan(text, &out);
  if (!s.ok()) {
    FT_FUZZ_CHECK(out.job == "sentinel", "output set on failure");
    fuzz::Refused(s);
    return 0;
  }
  NodePlan again;
  Status r = ParseNodePlan(EncodeNodePlan(out), &again);
  FT_FUZZ_CHECK(r.ok(), "what parsed does not parse again: " + r.ToString());
  FT_FUZZ_CHECK(again == out, "what parsed does not survive its round trip");
  fuzz::Accepted();
  return 0;
}

ft::fuzz::TargetInfo FuzzTargetInfo() {
  ft::fuzz::TargetInfo info;
  info.name = "node_plan";
  ft::ckpt::NodePlan settling = ft::ckpt::testing::SamplePlan();
  settling.settling = "rank 3 of this node ended (signal 9)";
  info.seeds = {ft::ckpt::EncodeNodePlan(ft::ckpt::testing::SamplePlan()), ft::ckpt::EncodeNodePlan(settling)};
  info.mutate.tokens = {"0", "1", "9", "a", "f", "x", " ", ":", ",", "/", ".", "-", "\n", "\t", "\x7f", "\xff",
                        "rank ", "step ", "settling ", "end\n", "18446744073709551616", "-1"};
  info.mutate.max_edits = 3;
  info.random_max_bytes = 300;
  info.random_start = "ft-restore-plan 1\n";
  info.random_rejected = true;
  info.mutations = 30000;
  info.min_accepted = 100;  // e.g. a digit changed inside a digest or a path
  info.min_rejected = 10000;
  return info;
}

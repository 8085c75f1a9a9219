// Every JSON value Redis carries (proto/*_codec.h), decoded from hostile bytes: an error names
// what is wrong with a code a caller handles and leaves the output untouched; whatever decodes
// survives its own round trip. Each input is tried as every kind of value.
#include <functional>

#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/master_codec.h"
#include "proto/node_history_codec.h"
#include "proto/prefetch_codec.h"
#include "proto/tests/sample_values.h"
#include "proto/transfer_codec.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace ft;
using namespace ft::proto;
using namespace ft::proto::testing;

template <typename T>
void DecodeChecked(const std::string& text) {
  T out{};
  Status status = Decode(text, &out);
  if (!status.ok()) {
    FT_FUZZ_CHECK(out == T{}, "output set on failure");
    fuzz::Refused(status);
    return;
  }
  T again{};
  Status s = Decode(Encode(out), &again);
  FT_FUZZ_CHECK(s.ok(), "what decoded does not decode again: " + s.ToString());
  FT_FUZZ_CHECK(again == out, "what decoded does not survive its round trip");
  fuzz::Accepted();
}

using DecodeFn = void (*)(const std::string&);
constexpr DecodeFn kKinds[] = {
    DecodeChecked<RankProgress>, DecodeChecked<Event>,         DecodeChecked<RankSummary>,
    DecodeChecked<Membership>,   DecodeChecked<TimeoutTable>,  DecodeChecked<Command>,
    DecodeChecked<CommandAck>,   DecodeChecked<Incident>,      DecodeChecked<WorkerHeartbeat>,
    DecodeChecked<MasterAction>, DecodeChecked<OpenIncident>,  DecodeChecked<CkptCopy>,
    DecodeChecked<StepVerdict>,  DecodeChecked<RestorePlan>,   DecodeChecked<PrefetchReport>,
    DecodeChecked<TransferEndpoint>, DecodeChecked<CkptRewinds>, DecodeChecked<NodeRecord>,
    DecodeChecked<CordonEntry>,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (DecodeFn decode : kKinds) decode(text);
  return 0;
}

ft::fuzz::TargetInfo FuzzTargetInfo() {
  ft::fuzz::TargetInfo info;
  info.name = "proto_codecs";
  info.seeds = {Encode(SampleProgress()), Encode(SampleEvent()),     Encode(SampleSummary()),
                Encode(SampleMembership()), Encode(SampleTimeouts()), Encode(SampleCommand()),
                Encode(SampleAck()),        Encode(SampleIncident()), Encode(SampleHeartbeat()),
                Encode(SampleAction()),     Encode(SampleOpenIncident()), Encode(SampleCkptCopy()),
                Encode(SampleVerdict()),    Encode(SamplePlan()),     Encode(SamplePrefetch()),
                Encode(SampleEndpoint()),   Encode(SampleNodeRecord()), Encode(SampleCordon())};
  info.mutate.tokens = ft::test_util::JsonTokens();
  info.random_max_bytes = 200;
  info.random_start = "{\"v\":1,";
  info.mutations = 20000;
  // 19 kinds per input: most fail as 18 of them; some mutations keep a value valid.
  info.min_accepted = 100;
  info.min_rejected = 100000;
  return info;
}

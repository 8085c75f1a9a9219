// Fields of the wrong type must give an error that names the field (or a value that survives
// its own round trip), never a crash, hang or exception. Mutated encodings and random bytes
// are the fuzz target tests/fuzz/targets/proto_codecs.cc (CTest fuzz.proto_codecs).
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
#include "proto/node_history_codec.h"
#include "proto/prefetch_codec.h"
#include "proto/transfer_codec.h"
#include "proto/tests/sample_values.h"

namespace ft::proto {
namespace {

using Json = nlohmann::json;
using namespace ft::proto::testing;

// Decodes `text` as type T and checks the contract; returns whether it decoded.
template <typename T>
bool DecodeChecked(const std::string& text, Status* status) {
  T out{};
  *status = Decode(text, &out);
  if (!status->ok()) {
    EXPECT_FALSE(status->message().empty());
    EXPECT_TRUE(status->code() == StatusCode::kCorrupt ||
                status->code() == StatusCode::kUnsupported)
        << status->ToString();
    EXPECT_TRUE(out == T{}) << "output set on failure";
    return false;
  }
  // Whatever decoded must survive its own round trip unchanged.
  T again{};
  Status s = Decode(Encode(out), &again);
  EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << text;
  EXPECT_TRUE(again == out) << text;
  return true;
}

struct Kind {
  const char* name;
  std::string sample;
  std::function<bool(const std::string&, Status*)> decode;
};

std::vector<Kind> AllKinds() {
  return {
      {"RankProgress", Encode(SampleProgress()), DecodeChecked<RankProgress>},
      {"Event", Encode(SampleEvent()), DecodeChecked<Event>},
      {"RankSummary", Encode(SampleSummary()), DecodeChecked<RankSummary>},
      {"Membership", Encode(SampleMembership()), DecodeChecked<Membership>},
      {"TimeoutTable", Encode(SampleTimeouts()), DecodeChecked<TimeoutTable>},
      {"Command", Encode(SampleCommand()), DecodeChecked<Command>},
      {"CommandAck", Encode(SampleAck()), DecodeChecked<CommandAck>},
      {"Incident", Encode(SampleIncident()), DecodeChecked<Incident>},
      {"WorkerHeartbeat", Encode(SampleHeartbeat()), DecodeChecked<WorkerHeartbeat>},
      {"MasterAction", Encode(SampleAction()), DecodeChecked<MasterAction>},
      {"OpenIncident", Encode(SampleOpenIncident()), DecodeChecked<OpenIncident>},
      {"Goodput", Encode(SampleGoodput()), DecodeChecked<Goodput>},
      {"CkptCopy", Encode(SampleCkptCopy()), DecodeChecked<CkptCopy>},
      {"StepVerdict", Encode(SampleVerdict()), DecodeChecked<StepVerdict>},
      {"RestorePlan", Encode(SamplePlan()), DecodeChecked<RestorePlan>},
      {"CkptRewinds", Encode(SampleRewinds()), DecodeChecked<CkptRewinds>},
      {"PrefetchReport", Encode(SamplePrefetch()), DecodeChecked<PrefetchReport>},
      {"TransferEndpoint", Encode(SampleEndpoint()), DecodeChecked<TransferEndpoint>},
      {"NodeRecord", Encode(SampleNodeRecord()), DecodeChecked<NodeRecord>},
      {"CordonEntry", Encode(SampleCordon()), DecodeChecked<CordonEntry>},
  };
}

// Every leaf of every sample replaced by a value of each other type.
void ForEachLeaf(const Json& j, const Json::json_pointer& at, const std::string& path,
                 const std::function<void(const Json::json_pointer&, const std::string&,
                                          const Json&)>& visit) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      ForEachLeaf(it.value(), at / it.key(), path.empty() ? it.key() : path + "." + it.key(),
                  visit);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      ForEachLeaf(j[i], at / i, path + "[" + std::to_string(i) + "]", visit);
    }
  }
  visit(at, path, j);
}

bool SameKind(const Json& original, const Json& replacement) {
  if (original.is_number_float()) return replacement.is_number();
  if (original.is_number_integer()) return replacement.is_number_integer();
  return original.type() == replacement.type();
}

TEST(CodecFuzzTest, TypeSwappedFields) {
  const std::vector<Json> replacements = {
      Json("text"), Json(""),   Json(7),          Json(-7),         Json(2.5),
      Json(true),   Json(nullptr), Json::array(), Json::array({1}), Json::object(),
      Json({{"v", 1}}), Json(1e308), Json(std::numeric_limits<uint64_t>::max())};
  int cases = 0;
  for (const Kind& k : AllKinds()) {
    Json sample = Json::parse(k.sample);
    ForEachLeaf(sample, Json::json_pointer(), "", [&](const Json::json_pointer& at,
                                                      const std::string& path,
                                                      const Json& original) {
      if (at.empty() || path == "v") return;
      for (const Json& r : replacements) {
        Json j = sample;
        j[at] = r;
        Status s;
        bool ok = k.decode(j.dump(), &s);
        ++cases;
        if (!SameKind(original, r)) {
          EXPECT_FALSE(ok) << k.name << " " << path << " = " << r.dump();
          EXPECT_EQ(s.message().rfind(path + ":", 0), 0u)
              << k.name << " " << path << " = " << r.dump() << ": " << s.message();
        }
      }
    });
  }
  EXPECT_GT(cases, 1000);
}

}  // namespace
}  // namespace ft::proto

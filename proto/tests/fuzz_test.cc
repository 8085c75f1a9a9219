// Decoding garbage: mutated encodings, random bytes and fields of the wrong type must give an
// error with a message (or a value that survives its own round trip), never a crash, hang or
// exception. Deterministic: a fixed seed, so a failure reproduces.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
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
      {"CkptCopy", Encode(SampleCkptCopy()), DecodeChecked<CkptCopy>},
      {"StepVerdict", Encode(SampleVerdict()), DecodeChecked<StepVerdict>},
      {"RestorePlan", Encode(SamplePlan()), DecodeChecked<RestorePlan>},
      {"PrefetchReport", Encode(SamplePrefetch()), DecodeChecked<PrefetchReport>},
      {"TransferEndpoint", Encode(SampleEndpoint()), DecodeChecked<TransferEndpoint>},
  };
}

std::string Mutate(std::string text, std::mt19937_64& rng) {
  static const std::string kInteresting = "{}[]\",:-+.eE0123456789\\ntfu\x00\xff";
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % (n ? n : 1)); };
  auto random_byte = [&]() -> char {
    return rng() % 2 ? kInteresting[pick(kInteresting.size())] : static_cast<char>(rng() & 0xff);
  };
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:  // flip a byte
        if (!text.empty()) text[pick(text.size())] = random_byte();
        break;
      case 1:  // truncate
        text.resize(pick(text.size() + 1));
        break;
      case 2: {  // insert random bytes
        size_t at = pick(text.size() + 1);
        std::string ins(1 + pick(8), ' ');
        for (char& c : ins) c = random_byte();
        text.insert(at, ins);
        break;
      }
      case 3: {  // delete a run
        if (text.empty()) break;
        size_t at = pick(text.size());
        text.erase(at, 1 + pick(16));
        break;
      }
      case 4: {  // duplicate a run somewhere else
        if (text.empty()) break;
        size_t at = pick(text.size());
        std::string run = text.substr(at, 1 + pick(32));
        text.insert(pick(text.size() + 1), run);
        break;
      }
      default: {  // swap a digit for an extreme number
        size_t at = text.find_first_of("0123456789", pick(text.size() + 1));
        if (at == std::string::npos) break;
        static const char* kNumbers[] = {"-1", "1e308", "1e999", "-0", "18446744073709551616",
                                         "9223372036854775808", "-9223372036854775809", "0.5"};
        text.replace(at, 1, kNumbers[pick(8)]);
        break;
      }
    }
  }
  return text;
}

TEST(CodecFuzzTest, MutatedEncodingsAndRandomBytes) {
  std::mt19937_64 rng(20261122);
  std::vector<Kind> kinds = AllKinds();
  int decoded = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text;
    if (iter % 10 == 9) {  // pure random bytes, sometimes behind a valid start
      text = rng() % 2 ? "{\"v\":1," : "";
      size_t n = rng() % 200;
      for (size_t i = 0; i < n; ++i) text += static_cast<char>(rng() & 0xff);
    } else {
      text = Mutate(kinds[rng() % kinds.size()].sample, rng);
    }
    for (const Kind& k : kinds) {
      Status s;
      if (k.decode(text, &s)) {
        ++decoded;
      } else {
        ++rejected;
      }
      if (::testing::Test::HasFailure()) {
        FAIL() << "iteration " << iter << " as " << k.name << ": " << text;
      }
    }
  }
  // Both outcomes happen: the mutations are neither all fatal nor all harmless.
  EXPECT_GT(decoded, 100);
  EXPECT_GT(rejected, 100000);
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

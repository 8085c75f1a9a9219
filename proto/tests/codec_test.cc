#include "proto/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
#include "proto/node_history_codec.h"
#include "proto/prefetch_codec.h"
#include "proto/tests/sample_values.h"

namespace ft::proto {
namespace {

using Json = nlohmann::json;
using namespace ft::proto::testing;

// Per struct: a sample with every field set, and its required fields as (JSON pointer, the
// path the error message must name).
template <typename T>
struct Traits;

template <>
struct Traits<RankProgress> {
  static RankProgress Sample() { return SampleProgress(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/rank", "rank"},
            {"/node", "node"},
            {"/state", "state"},
            {"/observed_unix_ms", "observed_unix_ms"},
            {"/comms/1/comm", "comms[1].comm"},
            {"/comms/2/entered", "comms[2].entered"},
            {"/comms/0/started", "comms[0].started"},
            {"/comms/0/completed", "comms[0].completed"}};
  }
};
template <>
struct Traits<Event> {
  static Event Sample() { return SampleEvent(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/kind", "kind"},
            {"/rank", "rank"},
            {"/node", "node"},
            {"/unix_ms", "unix_ms"},
            {"/progress/node", "progress.node"},
            {"/progress/comms/2/entered", "progress.comms[2].entered"}};
  }
};
template <>
struct Traits<RankSummary> {
  static RankSummary Sample() { return SampleSummary(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/rank", "rank"},
            {"/node", "node"},
            {"/unix_ms", "unix_ms"},
            {"/ops/0/comm", "ops[0].comm"},
            {"/ops/2/op", "ops[2].op"}};
  }
};
template <>
struct Traits<Membership> {
  static Membership Sample() { return SampleMembership(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/rank", "rank"}, {"/node", "node"}, {"/comms/1/comm", "comms[1].comm"}};
  }
};
template <>
struct Traits<TimeoutTable> {
  static TimeoutTable Sample() { return SampleTimeouts(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/version", "version"},
            {"/default_ms", "default_ms"},
            {"/entries/0/comm", "entries[0].comm"},
            {"/entries/1/op", "entries[1].op"},
            {"/entries/1/ms", "entries[1].ms"}};
  }
};
template <>
struct Traits<Command> {
  static Command Sample() { return SampleCommand(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/id", "id"}, {"/kind", "kind"}};
  }
};
template <>
struct Traits<CommandAck> {
  static CommandAck Sample() { return SampleAck(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/id", "id"}, {"/node", "node"}, {"/result", "result"}};
  }
};
template <>
struct Traits<Incident> {
  static Incident Sample() { return SampleIncident(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/id", "id"}, {"/kind", "kind"}};
  }
};
template <>
struct Traits<WorkerHeartbeat> {
  static WorkerHeartbeat Sample() { return SampleHeartbeat(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/node", "node"}, {"/unix_ms", "unix_ms"}};
  }
};

template <>
struct Traits<MasterAction> {
  static MasterAction Sample() { return SampleAction(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/incident", "incident"},     {"/decision", "decision"},
            {"/phase", "phase"},           {"/sent", "sent"},
            {"/acks_from", "acks_from"},   {"/deadline_unix_ms", "deadline_unix_ms"},
            {"/decided_unix_ms", "decided_unix_ms"}};
  }
};
template <>
struct Traits<OpenIncident> {
  static OpenIncident Sample() { return SampleOpenIncident(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/first_event_id", "first_event_id"},
            {"/first_event_unix_ms", "first_event_unix_ms"},
            {"/opened_unix_ms", "opened_unix_ms"}};
  }
};

template <>
struct Traits<Goodput> {
  static Goodput Sample() { return SampleGoodput(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/since_unix_ms", "since_unix_ms"}, {"/rank_s", "rank_s"},   {"/phase", "phase"},
            {"/furthest_step", "furthest_step"}, {"/stepping", "stepping"}};
  }
};

template <>
struct Traits<CkptCopy> {
  static CkptCopy Sample() { return SampleCkptCopy(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/step", "step"},     {"/rank", "rank"},   {"/node", "node"},
            {"/digest", "digest"}, {"/bytes", "bytes"}, {"/unix_ms", "unix_ms"}};
  }
};
template <>
struct Traits<StepVerdict> {
  static StepVerdict Sample() { return SampleVerdict(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/step", "step"},     {"/state", "state"},   {"/shards", "shards"},
            {"/verified_shards", "verified_shards"}, {"/copies", "copies"}, {"/unix_ms", "unix_ms"}};
  }
};
template <>
struct Traits<RestorePlan> {
  static RestorePlan Sample() { return SamplePlan(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/version", "version"},
            {"/step", "step"},
            {"/unix_ms", "unix_ms"},
            {"/ranks/1/rank", "ranks[1].rank"},
            {"/ranks/0/digest", "ranks[0].digest"},
            {"/ranks/1/sources/1/rank", "ranks[1].sources[1].rank"},
            {"/ranks/0/sources/0/node", "ranks[0].sources[0].node"},
            {"/ends_seen/1/unix_ms", "ends_seen[1].unix_ms"}};
  }
};

template <>
struct Traits<CkptRewinds> {
  static CkptRewinds Sample() { return SampleRewinds(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    // (`rewinds` itself too: CkptCodecTest.RewindsAreBoundedAndNamed.)
    return {{"/rewinds/1/step", "rewinds[1].step"}, {"/rewinds/0/unix_ms", "rewinds[0].unix_ms"}};
  }
};

template <>
struct Traits<PrefetchReport> {
  static PrefetchReport Sample() { return SamplePrefetch(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/node", "node"},
            {"/step", "step"},
            {"/state", "state"},
            {"/started_unix_ms", "started_unix_ms"},
            {"/ranks/1/rank", "ranks[1].rank"},
            {"/ranks/0/outcome", "ranks[0].outcome"},
            {"/ranks/2/ok", "ranks[2].ok"}};
  }
};

template <>
struct Traits<TransferEndpoint> {
  static TransferEndpoint Sample() { return SampleEndpoint(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    // "transports" is required too (a list: BadEndpointFieldsAreNamed).
    return {{"/node", "node"}, {"/address", "address"}, {"/port", "port"}, {"/unix_ms", "unix_ms"}};
  }
};

template <>
struct Traits<NodeRecord> {
  static NodeRecord Sample() { return SampleNodeRecord(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    // job and incident too, except in an operator's cordon records (NodeRecordsNeedTheirIncident).
    return {{"/kind", "kind"}, {"/node", "node"}, {"/unix_ms", "unix_ms"}};
  }
};

template <>
struct Traits<CordonEntry> {
  static CordonEntry Sample() { return SampleCordon(); }
  static std::vector<std::pair<std::string, std::string>> Required() {
    return {{"/node", "node"}, {"/reason", "reason"}, {"/unix_ms", "unix_ms"}};
  }
};

template <typename T>
class CodecTest : public ::testing::Test {};
using AllTypes = ::testing::Types<RankProgress, Event, RankSummary, Membership, TimeoutTable,
                                  Command, CommandAck, Incident, WorkerHeartbeat, MasterAction,
                                  OpenIncident, Goodput, CkptCopy, StepVerdict, RestorePlan,
                                  CkptRewinds, PrefetchReport, TransferEndpoint, NodeRecord, CordonEntry>;
TYPED_TEST_SUITE(CodecTest, AllTypes);

TYPED_TEST(CodecTest, RoundTripKeepsEveryField) {
  TypeParam in = Traits<TypeParam>::Sample();
  ASSERT_FALSE(in == TypeParam{}) << "the sample must differ from the defaults";
  std::string text = Encode(in);
  TypeParam out{};
  Status s = Decode(text, &out);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << text;
  EXPECT_TRUE(in == out) << text << "\n" << Encode(out);
  EXPECT_EQ(Encode(out), text);
}

TYPED_TEST(CodecTest, DefaultsRoundTripOrFailClearly) {
  // Defaults leave required strings empty (or a step -1): the reader must say which one,
  // never crash.
  TypeParam out{};
  Status s = Decode(Encode(TypeParam{}), &out);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), StatusCode::kCorrupt);
    EXPECT_TRUE(s.message().find("must not be empty") != std::string_view::npos ||
                s.message().rfind("step: must not be negative", 0) == 0)
        << s.ToString();
  }
}

TYPED_TEST(CodecTest, StartsWithVersion) {
  std::string text = Encode(Traits<TypeParam>::Sample());
  EXPECT_EQ(text.rfind("{\"v\":1,", 0), 0u) << text;
}

TYPED_TEST(CodecTest, MissingRequiredFieldIsNamed) {
  for (const auto& [pointer, path] : Traits<TypeParam>::Required()) {
    Json j = Json::parse(Encode(Traits<TypeParam>::Sample()));
    Json::json_pointer ptr(pointer);
    ASSERT_TRUE(j.contains(ptr)) << pointer;
    j[ptr.parent_pointer()].erase(ptr.back());
    TypeParam out = Traits<TypeParam>::Sample();
    out = TypeParam{};
    Status s = Decode(j.dump(), &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << pointer;
    EXPECT_EQ(s.message(), path + ": missing (required)") << s.ToString();
    EXPECT_TRUE(out == TypeParam{}) << "output set on failure";
  }
}

TYPED_TEST(CodecTest, WrongTypeOfRequiredFieldIsNamed) {
  for (const auto& [pointer, path] : Traits<TypeParam>::Required()) {
    Json j = Json::parse(Encode(Traits<TypeParam>::Sample()));
    Json::json_pointer ptr(pointer);
    j[ptr] = Json::array({1, 2});
    TypeParam out{};
    Status s = Decode(j.dump(), &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << pointer;
    EXPECT_EQ(s.message().rfind(path + ": expected ", 0), 0u) << s.ToString();
    EXPECT_NE(s.message().find("got an array"), std::string_view::npos) << s.ToString();
  }
}

TYPED_TEST(CodecTest, OtherVersionIsUnsupportedNamingBoth) {
  Json j = Json::parse(Encode(Traits<TypeParam>::Sample()));
  j["v"] = 2;
  TypeParam out{};
  Status s = Decode(j.dump(), &out);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("version 2"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find("version 1"), std::string_view::npos) << s.ToString();
  j.erase("v");
  s = Decode(j.dump(), &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "v: missing (required)");
  j["v"] = "1";
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
  j["v"] = 1.0;
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
  j["v"] = -1;
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kUnsupported);
  EXPECT_TRUE(out == TypeParam{});
}

TYPED_TEST(CodecTest, UnknownFieldsAreIgnored) {
  Json j = Json::parse(Encode(Traits<TypeParam>::Sample()));
  j["added_in_v1_5"] = {{"nested", Json::array({1, "x", nullptr})}};
  j["another"] = nullptr;
  TypeParam out{};
  ASSERT_TRUE(Decode(j.dump(), &out).ok());
  EXPECT_TRUE(out == Traits<TypeParam>::Sample());
}

TYPED_TEST(CodecTest, NotAnObject) {
  TypeParam out{};
  for (const char* text : {"", "null", "[]", "[{\"v\":1}]", "1", "\"v\"", "{", "{\"v\":1",
                           "{\"v\":1}}", "{\"v\":1,}", "{'v':1}", "\xff\xfe"}) {
    Status s = Decode(text, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << text;
    EXPECT_FALSE(s.message().empty());
  }
}

// --- Specific rejections --------------------------------------------------------------------

Json SampleEventJson() { return Json::parse(Encode(SampleEvent())); }

TEST(CodecRejectTest, NestedWrongTypeNamesTheFullPath) {
  Json j = SampleEventJson();
  j["progress"]["comms"][2]["entered"] = "812";
  Event out;
  Status s = Decode(j.dump(), &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "progress.comms[2].entered: expected an integer, got a string");
}

TEST(CodecRejectTest, NegativeSequenceNumbers) {
  Json j = SampleEventJson();
  j["progress"]["comms"][1]["completed"] = -1;
  Event out;
  Status s = Decode(j.dump(), &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "progress.comms[1].completed: must not be negative, got -1");
  j = SampleEventJson();
  j["seq"] = -812;
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
}

TEST(CodecRejectTest, FractionalWhereIntegerExpected) {
  Json j = SampleEventJson();
  j["seq"] = 812.5;
  Event out;
  Status s = Decode(j.dump(), &out);
  EXPECT_EQ(s.message(), "seq: expected an integer, got a fractional number");
}

TEST(CodecRejectTest, IntegersOutOfRange) {
  Json j = SampleEventJson();
  j["rank"] = 1LL << 40;
  Event out;
  Status s = Decode(j.dump(), &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("rank: 1099511627776 is out of range", 0), 0u) << s.message();
  j = SampleEventJson();
  j["rank"] = -2;
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
  j = SampleEventJson();
  j["unix_ms"] = std::numeric_limits<uint64_t>::max();  // beyond int64
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
  // The largest sequence number a uint64 holds is fine.
  j = SampleEventJson();
  j["seq"] = std::numeric_limits<uint64_t>::max();
  ASSERT_TRUE(Decode(j.dump(), &out).ok());
  EXPECT_EQ(out.seq, std::numeric_limits<uint64_t>::max());
}

TEST(CodecRejectTest, NonFiniteNumbers) {
  std::string text = Encode(SampleEvent());
  size_t at = text.find("\"age_ms\":");
  ASSERT_NE(at, std::string::npos);
  for (const char* bad : {"1e999", "-1e999", "NaN", "Infinity", "nan"}) {
    std::string t = text;
    t.insert(at + 9, std::string(bad) + ",\"x\":");
    Event out;
    Status s = Decode(t, &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << bad;
    EXPECT_FALSE(s.message().empty());
  }
}

TEST(CodecRejectTest, NonFiniteValuesAreEncodedAsFiniteNumbers) {
  Event e = SampleEvent();
  e.age_ms = std::numeric_limits<double>::quiet_NaN();
  e.timeout_ms = std::numeric_limits<double>::infinity();
  Event out;
  Status s = Decode(Encode(e), &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.age_ms, 0);
  EXPECT_TRUE(std::isfinite(out.timeout_ms));
}

TEST(CodecRejectTest, InvalidUtf8IsEncodedWithoutThrowing) {
  CommandAck a = SampleAck();
  a.message = "bad \xff\xfe bytes";
  CommandAck out;
  ASSERT_TRUE(Decode(Encode(a), &out).ok());
  EXPECT_EQ(out.message, "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes");
}

TEST(CodecRejectTest, RangesOfNumbers) {
  Json j = Json::parse(Encode(SampleIncident()));
  j["confidence"] = 1.5;
  Incident inc;
  Status s = Decode(j.dump(), &inc);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("confidence: ", 0), 0u) << s.message();

  Json t = Json::parse(Encode(SampleTimeouts()));
  t["entries"][1]["ms"] = 0;
  TimeoutTable table;
  s = Decode(t.dump(), &table);
  EXPECT_EQ(s.message(), "entries[1].ms: must be positive");
  t = Json::parse(Encode(SampleTimeouts()));
  t["entries"][0]["bucket"] = 5;
  EXPECT_EQ(Decode(t.dump(), &table).code(), StatusCode::kCorrupt);
  t = Json::parse(Encode(SampleTimeouts()));
  t["default_ms"] = -1;
  EXPECT_EQ(Decode(t.dump(), &table).code(), StatusCode::kCorrupt);
}

TEST(CodecRejectTest, BadCommunicatorIds) {
  for (const char* bad : {"", "3fa2", "3fa2c0ffee00000g", "3fa2c0ffee0000000", " 3fa2c0ffee00000",
                          "0x3fa2c0ffee0000"}) {
    Json j = SampleEventJson();
    j["comm"] = bad;
    Event out;
    Status s = Decode(j.dump(), &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << bad;
    EXPECT_EQ(s.message(), "comm: expected 16 hex digits") << bad;
  }
  Json j = SampleEventJson();
  j["comm"] = 42;
  Event out;
  EXPECT_EQ(Decode(j.dump(), &out).message(),
            "comm: expected a communicator id string (16 hex digits), got an integer");
}

TEST(CodecRejectTest, EmptyRequiredStrings) {
  Json j = Json::parse(Encode(SampleCommand()));
  j["id"] = "";
  Command out;
  EXPECT_EQ(Decode(j.dump(), &out).message(), "id: must not be empty");
}

TEST(CodecRejectTest, LongListsAndStrings) {
  Json j = Json::parse(Encode(SampleIncident()));
  j["message"] = std::string(kMaxStringBytes + 1, 'x');
  Incident out;
  Status s = Decode(j.dump(), &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("message: string of 65537 bytes", 0), 0u) << s.message();
  j["message"] = std::string(kMaxStringBytes, 'x');
  EXPECT_TRUE(Decode(j.dump(), &out).ok());

  std::string text = Encode(SampleHeartbeat());
  std::string many = "[";
  for (size_t i = 0; i <= kMaxListEntries; ++i) many += i ? ",0" : "0";
  many += "]";
  text.replace(text.find("[0,1,2,3]"), 9, many);
  WorkerHeartbeat hb;
  s = Decode(text, &hb);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("ranks: 1048577 entries, more than the limit", 0), 0u)
      << s.message().substr(0, 200);
}

TEST(CodecRejectTest, DeepNestingAndHugeValues) {
  std::string deep = "{\"v\":1,\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  Command out;
  Status s = Decode(deep, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("nested deeper"), std::string_view::npos);
  // Brackets inside strings do not count.
  Command c = SampleCommand();
  c.text = std::string(1000, '[') + "\\\"{";
  ASSERT_TRUE(Decode(Encode(c), &out).ok());
  EXPECT_EQ(out.text, c.text);

  std::string huge(kMaxValueBytes + 1, ' ');
  s = Decode(huge, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("more than the limit"), std::string_view::npos);
}

TEST(CodecRejectTest, OutputUntouchedOnFailure) {
  Command keep = SampleCommand();
  Command out = keep;
  Json j = Json::parse(Encode(SampleCommand()));
  j["grace_s"] = "ten";
  EXPECT_FALSE(Decode(j.dump(), &out).ok());
  EXPECT_TRUE(out == keep);
}

// --- Accepted shapes ------------------------------------------------------------------------

TEST(CodecAcceptTest, MissingOptionalFieldsKeepDefaults) {
  Command out;
  Status s = Decode(R"({"v":1,"id":"c1","kind":"stop"})", &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.id, "c1");
  EXPECT_EQ(out.rank, -1);
  EXPECT_EQ(out.grace_s, 10);

  RankProgress p;
  s = Decode(R"({"v":1,"rank":0,"node":"n","state":"running","observed_unix_ms":5,
                 "comms":[{"comm":"00000000000000aB","entered":3,"started":2,"completed":1}]})",
             &p);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(p.comms.size(), 1u);
  EXPECT_EQ(p.comms[0].comm_id, 0xabu);
  EXPECT_EQ(p.comms[0].comm_rank, -1);
  EXPECT_EQ(p.comms[0].entered_age_ms, -1);
  EXPECT_EQ(p.last_call_age_ms, -1);
  EXPECT_EQ(p.heartbeat_age_ms, -1);  // a worker from before these fields: unknown, not frozen
  EXPECT_FALSE(p.frozen);
  EXPECT_EQ(p.proc_state, "");

  Event e;
  s = Decode(R"({"v":1,"kind":"exit","rank":3,"node":"n","unix_ms":1,"code":-9})", &e);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(e.code, -9);
  EXPECT_EQ(e.progress.rank, -1);
}

TEST(CodecAcceptTest, FieldNamesOfTheSchema) {
  Json p = Json::parse(Encode(SampleProgress()));
  const Json& row = p["comms"][0];
  for (const char* f : {"comm", "p2p", "comm_rank", "comm_size", "op", "bytes", "peer", "entered",
                        "started", "completed", "entered_age_ms", "started_age_ms",
                        "completed_age_ms"}) {
    EXPECT_TRUE(row.contains(f)) << f;
  }
  EXPECT_EQ(row["comm"], "3fa2c0ffee000000");
  for (const char* f : {"rank", "node", "pid", "incarnation", "state", "observed_unix_ms",
                        "last_call_age_ms", "blocked_ms", "cpu_pct", "busy", "proc_state",
                        "heartbeat_age_ms", "frozen", "comms"}) {
    EXPECT_TRUE(p.contains(f)) << f;
  }
  Json e = SampleEventJson();
  EXPECT_TRUE(e["progress"].is_object());
  EXPECT_EQ(e["progress"]["comms"].size(), 3u);
  Json i = Json::parse(Encode(SampleIncident()));
  EXPECT_EQ(i["suspects"][0], Json({{"rank", 5}, {"node", "node1"},
                                    {"why", "never reached allreduce #812"}}));
  EXPECT_EQ(i["comm"], "0000000000003fa2");
}

TEST(CodecAcceptTest, EventWritesOnlyItsKindsFields) {
  Event e;
  e.kind = "exit";
  e.rank = 1;
  e.node = "n";
  e.unix_ms = 9;
  Json j = Json::parse(Encode(e));
  EXPECT_TRUE(j.contains("code"));
  EXPECT_TRUE(j.contains("clean"));
  EXPECT_FALSE(j.contains("comm"));
  EXPECT_FALSE(j.contains("step_ms"));
  e.kind = "timeout";
  j = Json::parse(Encode(e));
  for (const char* f : {"comm", "op", "seq", "age_ms", "timeout_ms", "started"}) {
    EXPECT_TRUE(j.contains(f)) << f;
  }
  EXPECT_FALSE(j.contains("clean"));
}

// An exit after a launcher's SIGTERM says so (the master does not read it as a crash); the
// fields appear only when set, and a reader from before them ignores them.
TEST(CodecAcceptTest, ExitAfterATerminateSignal) {
  Event e;
  e.kind = "exit";
  e.rank = 3;
  e.node = "n";
  e.unix_ms = 9;
  Json j = Json::parse(Encode(e));
  EXPECT_FALSE(j.contains("terminated_by_signal"));
  EXPECT_FALSE(j.contains("terminate_unix_ms"));
  e.code = -15;
  e.terminated_by_signal = 15;
  e.terminate_unix_ms = 1763800000123;
  j = Json::parse(Encode(e));
  EXPECT_EQ(j["terminated_by_signal"], 15);
  EXPECT_EQ(j["terminate_unix_ms"], 1763800000123);
  Event back;
  ASSERT_TRUE(Decode(Encode(e), &back).ok());
  EXPECT_EQ(back, e);
  j["terminated_by_signal"] = 999;
  EXPECT_FALSE(Decode(j.dump(), &back).ok()) << "not a signal number";
  // A frozen event: how long in age_ms.
  Event f;
  f.kind = "frozen";
  f.rank = 3;
  f.node = "n";
  f.unix_ms = 9;
  f.age_ms = 3100;
  ASSERT_TRUE(Decode(Encode(f), &back).ok());
  EXPECT_EQ(back, f);
}

// The layout of one value, pinned: other programs (and people with redis-cli) read it.
TEST(CodecAcceptTest, PinnedEncoding) {
  EXPECT_EQ(Encode(SampleCommand()),
            R"({"v":1,"id":"incident-3/save","kind":"save","rank":4,"text":"save now",)"
            R"("grace_s":2.5,"unix_ms":1763800000600,"decided_unix_ms":1763800000100,)"
            R"("incarnations":[{"rank":4,"incarnation":1763799990123456789}]})");
  // A command without incarnations or a decision time is written as before them.
  proto::Command plain = SampleCommand();
  plain.incarnations.clear();
  plain.decided_unix_ms = 0;
  EXPECT_EQ(Encode(plain), R"({"v":1,"id":"incident-3/save","kind":"save","rank":4,"text":"save now",)"
                           R"("grace_s":2.5,"unix_ms":1763800000600})");
  EXPECT_EQ(Encode(SampleTimeouts()),
            R"({"v":1,"version":17,"default_ms":30000.0,"unix_ms":1763800000500,"entries":[)"
            R"({"comm":"0000000000000001","op":"allreduce","bucket":2,"ms":1500.5},)"
            R"({"comm":"0000000000000002","op":"allgather","bucket":4,"ms":9000.0}]})");
}

// A save's acknowledgement carries its copy typed; one from a worker of the previous release,
// which wrote the message only, is read from its message.
TEST(CodecAcceptTest, SaveAckCarriesItsCopyAndOldAcksAreReadFromTheMessage) {
  CommandAck a = SampleAck();
  a.result = "done";
  a.message = "saved step=12 digest=00000000deadbeef torn=0 bytes=4096 ms=3";
  a.saved = SavedCopy{12, 0xdeadbeef, false, 4096, 3};
  EXPECT_EQ(Encode(a),
            R"({"v":1,"id":"incident-3/save","node":"node1","rank":4,"result":"done",)"
            R"("message":"saved step=12 digest=00000000deadbeef torn=0 bytes=4096 ms=3","unix_ms":1763800000700,)"
            R"("saved":{"step":12,"digest":"00000000deadbeef","torn":false,"bytes":4096,"ms":3}})");
  CommandAck out;
  ASSERT_TRUE(Decode(Encode(a), &out).ok());
  EXPECT_EQ(out, a);

  CommandAck old = a;
  old.saved.reset();
  old.message = "saved step=61 digest=0000000000000062 torn=1 bytes=4096 ms=3";
  ASSERT_TRUE(Decode(Encode(old), &out).ok());
  ASSERT_TRUE(out.saved.has_value());
  EXPECT_EQ(out.saved->step, 61);
  EXPECT_TRUE(out.saved->torn);
  old.result = "failed";  // only a done save said what it saved
  ASSERT_TRUE(Decode(Encode(old), &out).ok());
  EXPECT_FALSE(out.saved.has_value());

  Json j = Json::parse(Encode(a));
  j["saved"]["digest"] = 7;
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
}

// The master's own values: a state a newer or older master must be able to resume.
TEST(MasterCodecTest, PinnedEncoding) {
  EXPECT_EQ(Encode(SampleOpenIncident()),
            R"({"v":1,"first_event_id":"1763800000000-3","first_event_unix_ms":1763800000000,)"
            R"("opened_unix_ms":1763800000020,"outcomes":2,"last_outcome":"busy:3,5","watching":true})");
  EXPECT_EQ(Encode(SampleAction()),
            R"({"v":1,"incident":"1763800000000-hang","decision":"save-then-stop","save":[)"
            R"("node-a:3",":7"],"phase":"stop","sent":true,)"
            R"("acks_from":"1763800000100-0","deadline_unix_ms":1763800030000,)"
            R"("nodes":["node-a","node-b"],"decided_unix_ms":1763800000900})");
}

// The goodput ledger a next master continues: every cause by name, the incidents' own costs.
TEST(MasterCodecTest, GoodputPinnedAndRefusedWhenGarbled) {
  EXPECT_EQ(Encode(SampleGoodput()),
            R"({"v":1,"since_unix_ms":1763800000000,"last_unix_ms":1763800090000,"rank_s":{"productive":480.0,)"
            R"("startup":40.0,"detection":24.0,"save-stop":8.0,"relaunch":12.0,"redone":16.0,"slowed":20.0,)"
            R"("idle":4.0},"wall_s":{"productive":60.0,"startup":5.0,"detection":3.0,"save-stop":1.0,)"
            R"("relaunch":1.5,"redone":2.0,"slowed":2.5,"idle":0.5},"phase":"redone","furthest_step":120,)"
            R"("redo_until_step":100,"redo_left_s":3.5,"launch_incarnation":1,"incarnation":2,"stepping":true,"normal_step_ms":250.5,"incidents":[)"
            R"({"id":"1763800030000-hang","fault_unix_ms":1763800029000,"rank_s":{"startup":40.0,)"
            R"("detection":24.0,"save-stop":8.0,"relaunch":12.0,"redone":16.0,"slowed":0.0,"idle":0.0},)"
            R"("open":true}]})");
  Goodput out;
  Json negative = Json::parse(Encode(SampleGoodput()));
  negative["rank_s"]["relaunch"] = -3;
  Status s = Decode(negative.dump(), &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("rank_s.relaunch"), std::string_view::npos) << s.ToString();
  Json phase = Json::parse(Encode(SampleGoodput()));
  phase["phase"] = "lunch";
  s = Decode(phase.dump(), &out);
  EXPECT_NE(s.message().find("unknown goodput cause 'lunch'"), std::string_view::npos) << s.ToString();
  // A cause a newer master counts is left alone; the ones this build knows are read.
  Json newer = Json::parse(Encode(SampleGoodput()));
  newer["rank_s"]["preempted"] = 7;
  ASSERT_TRUE(Decode(newer.dump(), &out).ok());
  EXPECT_EQ(out, SampleGoodput());
}

// The save list as masters wrote it before it was grouped by node: an action in flight across
// an upgrade resumes.
TEST(MasterCodecTest, TheEarlierSaveListStillDecodes) {
  MasterAction a;
  ASSERT_TRUE(Decode(R"({"v":1,"incident":"1763800000000-hang","decision":"save-then-stop","save":[)"
                     R"({"rank":3,"node":"node-a"},{"rank":7,"node":""}],"phase":"stop","sent":true,)"
                     R"("acks_from":"1763800000100-0","deadline_unix_ms":1763800030000,)"
                     R"("nodes":["node-a","node-b"],"decided_unix_ms":1763800000900})",
                     &a).ok());
  EXPECT_EQ(a, SampleAction());
}

// 131,071 targets on 16,384 nodes: one short entry per node, every target back in rank order.
TEST(MasterCodecTest, ASaveListIsOneEntryPerNode) {
  MasterAction a = SampleAction();
  a.save.clear();
  for (int r = 0; r < 131072; ++r) {
    if (r != 72091) a.save.push_back({r, "n" + std::to_string(r / 8)});
  }
  const std::string encoded = Encode(a);
  EXPECT_LT(encoded.size(), 400000u) << "was 4.1 MB as objects";
  EXPECT_NE(encoded.find(R"("n9011:72088-72090,72092-72095")"), std::string::npos);
  MasterAction back;
  ASSERT_TRUE(Decode(encoded, &back).ok());
  EXPECT_EQ(back, a);
}

TEST(MasterCodecTest, AGarbledSaveEntryIsNamed) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {"node-a", "save[0]: expected <node>:<ranks>"},
      {"node-a:", "save[0]: a node without ranks"},
      {"node-a:3-1", "save[0]: rank ranges"},
      {"node-a:0-1073741823", "save[0]: more ranks than the limit"},
      {7, "save[0]: expected a string"},
  };
  for (const auto& [entry, names] : cases) {
    Json j = Json::parse(Encode(SampleAction()));
    j["save"][0] = entry;
    MasterAction out;
    Status s = Decode(j.dump(), &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << entry.dump();
    EXPECT_NE(s.message().find(names), std::string::npos) << s.message();
    EXPECT_EQ(out, MasterAction{}) << entry.dump();
  }
  // Many entries that together exceed the limit are refused before they are expanded.
  Json j = Json::parse(Encode(SampleAction()));
  j["save"] = Json::array();
  for (int i = 0; i < 3; ++i) j["save"].push_back("n" + std::to_string(i) + ":0-500000");
  MasterAction out;
  Status s = Decode(j.dump(), &out);
  EXPECT_NE(s.message().find("more ranks than the limit"), std::string::npos) << s.message();
}

TEST(MasterCodecTest, UnknownPhaseAndBadStreamIdAreNamed) {
  Json j = Json::parse(Encode(SampleAction()));
  j["phase"] = "saving";
  MasterAction a;
  Status s = Decode(j.dump(), &a);
  ASSERT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("phase: unknown phase 'saving'", 0), 0u) << s.message();

  for (const char* id : {"1763800000000", "-3", "17638x-3", "1763800000000-", "1-2-3"}) {
    Json o = Json::parse(Encode(SampleOpenIncident()));
    o["first_event_id"] = id;
    OpenIncident out;
    s = Decode(o.dump(), &out);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << id;
    EXPECT_EQ(s.message().rfind("first_event_id: expected a stream id", 0), 0u) << s.message();
  }
}

TEST(MasterCodecTest, OlderActionWithoutOptionalListsDecodes) {
  // save and nodes are optional: a stop decision written without them resumes.
  MasterAction a;
  Status s = Decode(R"({"v":1,"incident":"9-hang","decision":"stop","phase":"stop","sent":false,)"
                    R"("acks_from":"","deadline_unix_ms":0,"decided_unix_ms":9})",
                    &a);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(a.save.empty());
  EXPECT_TRUE(a.nodes.empty());
  EXPECT_EQ(a.phase, ActionPhase::kStop);
}

// --- Checkpoint values (ckpt_codec.h) ---------------------------------------------------------

// Sets `pointer` in `sample`'s encoding to `value` and returns the decode's message (empty: ok).
template <typename T>
std::string DecodeWith(const T& sample, const std::string& pointer, const Json& value) {
  Json j = Json::parse(Encode(sample));
  j[Json::json_pointer(pointer)] = value;
  T out{};
  Status s = Decode(j.dump(), &out);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
    EXPECT_TRUE(out == T{}) << "output set on failure";
  }
  return s.ok() ? std::string() : std::string(s.message());
}

TEST(CkptCodecTest, DigestsAreSixteenHexDigits) {
  std::string text = Encode(SampleCkptCopy());
  EXPECT_NE(text.find("\"digest\":\"fedcba9876543210\""), std::string::npos) << text;
  EXPECT_EQ(DecodeWith(SampleCkptCopy(), "/digest", "FEDCBA9876543210"), "");
  EXPECT_EQ(DecodeWith(SampleCkptCopy(), "/digest", "fedcba987654321"), "digest: expected 16 hex digits");
  EXPECT_EQ(DecodeWith(SampleCkptCopy(), "/digest", "fedcba98765432100"), "digest: expected 16 hex digits");
  EXPECT_EQ(DecodeWith(SampleCkptCopy(), "/digest", "fedcba987654321g"), "digest: expected 16 hex digits");
  EXPECT_EQ(DecodeWith(SampleCkptCopy(), "/digest", 12345).rfind("digest: expected a digest string", 0), 0u);
  EXPECT_EQ(DecodeWith(SamplePlan(), "/ranks/1/digest", "xyz"), "ranks[1].digest: expected 16 hex digits");
}

TEST(CkptCodecTest, BadCopyFieldsAreNamed) {
  const CkptCopy c = SampleCkptCopy();
  EXPECT_EQ(DecodeWith(c, "/step", -1), "step: must not be negative, got -1");
  EXPECT_EQ(DecodeWith(c, "/rank", -2), "rank: must not be negative, got -2");
  EXPECT_EQ(DecodeWith(c, "/node", ""), "node: must not be empty");
  EXPECT_EQ(DecodeWith(c, "/origin", "mystery"), "origin 'mystery' is not periodic, just-in-time or termination");
  EXPECT_EQ(DecodeWith(c, "/origin", "periodic"), "");
  EXPECT_EQ(DecodeWith(c, "/tp", -1), "");  // unknown: the topology says
  EXPECT_EQ(DecodeWith(c, "/tp", -2).rfind("tp: -2 is out of range [-1, ", 0), 0u);
  EXPECT_EQ(DecodeWith(c, "/dp", 1.5).rfind("dp: expected an integer", 0), 0u);
  EXPECT_EQ(DecodeWith(c, "/bytes", -1), "bytes: must not be negative, got -1");
  EXPECT_EQ(DecodeWith(c, "/torn", 1).rfind("torn: expected a boolean", 0), 0u);
  EXPECT_EQ(DecodeWith(c, "/tiers/1", "tape"), "tiers[1]: unknown tier 'tape' (arena, local, remote, replica)");
  EXPECT_EQ(DecodeWith(c, "/tiers/0", ""), "tiers[0]: must not be empty");
  EXPECT_EQ(DecodeWith(c, "/tiers", "arena").rfind("tiers: expected a list", 0), 0u);
  EXPECT_EQ(DecodeWith(c, "/error", 3).rfind("error: expected a string", 0), 0u);
}

TEST(CkptCodecTest, BadVerdictFieldsAreNamed) {
  const StepVerdict v = SampleVerdict();
  EXPECT_EQ(DecodeWith(v, "/state", "fine"), "state: unknown state 'fine' (verified, untrusted, incomplete)");
  for (const char* state : {"verified", "untrusted", "incomplete"}) EXPECT_EQ(DecodeWith(v, "/state", state), "");
  EXPECT_EQ(DecodeWith(v, "/verified_shards", 5), "verified_shards: 5 is more than the 4 shards");
  EXPECT_EQ(DecodeWith(v, "/shards", -1), "shards: must not be negative, got -1");
  EXPECT_EQ(DecodeWith(v, "/copies", -1), "copies: must not be negative, got -1");
  EXPECT_EQ(DecodeWith(v, "/sdc_ranks/1", -9), "sdc_ranks[1]: must not be negative, got -9");
  EXPECT_EQ(DecodeWith(v, "/sdc_ranks/0", "3").rfind("sdc_ranks[0]: expected an integer", 0), 0u);
}

TEST(CkptCodecTest, BadPlanFieldsAreNamed) {
  const RestorePlan p = SamplePlan();
  EXPECT_EQ(DecodeWith(p, "/version", -1), "version: must not be negative, got -1");
  EXPECT_EQ(DecodeWith(p, "/step", -2).rfind("step: -2 is out of range [-1, ", 0), 0u);
  EXPECT_EQ(DecodeWith(p, "/step", -1), "ranks: a plan with no step (-1) names no ranks");
  EXPECT_EQ(DecodeWith(p, "/ranks/0/sources/1/tiers/0", "nvme"),
            "ranks[0].sources[1].tiers[0]: unknown tier 'nvme' (arena, local, remote, replica)");
  EXPECT_EQ(DecodeWith(p, "/ranks/1/sources/0/node", ""), "ranks[1].sources[0].node: must not be empty");
  EXPECT_EQ(DecodeWith(p, "/ranks/1/sources", Json::object()).rfind("ranks[1].sources: expected a list", 0), 0u);
  EXPECT_EQ(DecodeWith(p, "/ranks/0", 7).rfind("ranks[0]: expected an object", 0), 0u);
}

// A settling plan says so and why; a plan from before `state` (or "final") is final.
TEST(CkptCodecTest, APlanIsFinalOrSettlingWithItsReason) {
  RestorePlan p = SamplePlan();
  EXPECT_NE(Encode(p).find(R"("state":"final")"), std::string::npos) << Encode(p);
  p.settling = "step 1300 waits for its replicas' copies";
  const std::string text = Encode(p);
  EXPECT_NE(text.find(R"("state":"settling","why":"step 1300 waits for its replicas' copies")"), std::string::npos)
      << text;
  RestorePlan out;
  ASSERT_TRUE(Decode(text, &out).ok());
  EXPECT_TRUE(out == p);
  Json older = Json::parse(Encode(SamplePlan()));
  older.erase("state");
  ASSERT_TRUE(Decode(older.dump(), &out).ok());
  EXPECT_EQ(out.settling, "");
  EXPECT_EQ(DecodeWith(SamplePlan(), "/state", "maybe"), "state: 'maybe' is neither 'final' nor 'settling'");
  EXPECT_EQ(DecodeWith(SamplePlan(), "/state", "settling"), "why: missing (required)");
}

// The ends a plan was built after: per node, the newest (a repeated node keeps its newest); a
// plan from before the echo has none.
TEST(CkptCodecTest, APlanEchoesTheEndsItHeardOf) {
  RestorePlan out;
  ASSERT_TRUE(Decode(Encode(SamplePlan()), &out).ok());
  EXPECT_EQ(out.ends_seen, (std::map<std::string, int64_t>{{"node0", 1763800001100}, {"node1", 1763800001150}}));
  Json twice = Json::parse(Encode(SamplePlan()));
  twice["ends_seen"].push_back(Json{{"node", "node0"}, {"unix_ms", 7}});
  ASSERT_TRUE(Decode(twice.dump(), &out).ok());
  EXPECT_EQ(out.ends_seen.at("node0"), 1763800001100);
  Json older = Json::parse(Encode(SamplePlan()));
  older.erase("ends_seen");
  ASSERT_TRUE(Decode(older.dump(), &out).ok());
  EXPECT_TRUE(out.ends_seen.empty());
  EXPECT_EQ(DecodeWith(SamplePlan(), "/ends_seen/0/node", ""), "ends_seen[0].node: must not be empty");
  EXPECT_EQ(DecodeWith(SamplePlan(), "/ends_seen/1/unix_ms", -3), "ends_seen[1].unix_ms: must not be negative, got -3");
}

TEST(CkptCodecTest, NoPlanAndEmptyListsDecode) {
  RestorePlan none;
  none.version = 1;
  none.unix_ms = 5;
  RestorePlan out;
  ASSERT_TRUE(Decode(Encode(none), &out).ok());
  EXPECT_TRUE(out == none);
  CkptCopy c;
  Status s = Decode(R"({"v":1,"step":7,"rank":2,"node":"n","digest":"00000000000000ff","bytes":9,"unix_ms":1})", &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.tp, -1);
  EXPECT_EQ(c.digest, 0xffu);
  EXPECT_FALSE(c.torn);
  EXPECT_TRUE(c.tiers.empty());
}

TEST(CkptCodecTest, RewindsAreBoundedAndNamed) {
  CkptRewinds out;
  EXPECT_EQ(Decode(R"({"v":1})", &out).message().rfind("rewinds: ", 0), 0u);
  CkptRewinds many;
  for (size_t k = 0; k <= kMaxCkptRewinds; ++k) many.rewinds.push_back({static_cast<int64_t>(k), 1000, ""});
  Status s = Decode(Encode(many), &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("more than the 16 kept"), std::string::npos) << s.ToString();
  EXPECT_EQ(Decode(R"({"v":1,"rewinds":[{"step":-2,"unix_ms":5}]})", &out).message().rfind("rewinds[0].step", 0), 0u);
  EXPECT_TRUE(out == CkptRewinds{}) << "untouched on error";
  ASSERT_TRUE(Decode(R"({"v":1,"rewinds":[]})", &out).ok());
  EXPECT_TRUE(out.rewinds.empty());
}

TEST(CkptCodecTest, PinnedEncoding) {
  EXPECT_EQ(Encode(SampleVerdict()),
            R"({"v":1,"step":1200,"state":"verified","shards":4,"verified_shards":4,"copies":7,)"
            R"("sdc_ranks":[3,9],"why":"4/4 shards verified; rank 3 disagrees with its 2 replicas",)"
            R"("unix_ms":1763800001100})");
  CkptCopy c = SampleCkptCopy();
  c.tiers = {"arena"};
  c.error = "";
  EXPECT_EQ(Encode(c),
            R"({"v":1,"step":1200,"rank":5,"node":"node1","tp":1,"pp":0,"dp":2,)"
            R"("digest":"fedcba9876543210","torn":true,"origin":"termination","bytes":1099511627779,)"
            R"("tiers":["arena"],"error":"","unix_ms":1763800001000,"saved_unix_ms":1763800000900})");
  c.saved_unix_ms = 0;  // unknown (a worker from before it): not written, and decoded as 0
  EXPECT_EQ(Encode(c).find("saved_unix_ms"), std::string::npos);
  CkptCopy back;
  ASSERT_TRUE(Decode(Encode(c), &back).ok());
  EXPECT_EQ(back.saved_unix_ms, 0);
  c.origin = "";  // unknown (a manifest of format 1): not written
  EXPECT_EQ(Encode(c).find("origin"), std::string::npos);
  EXPECT_EQ(Encode(c).find("buddy"), std::string::npos) << "written only when true";
}

// A buddy copy (ft:{J}:ckpt:<step>:buddy): its flag and the "replica" tier survive the trip.
TEST(CkptCodecTest, BuddyCopyRoundTrips) {
  CkptCopy c = SampleCkptCopy();
  c.buddy = true;
  c.tiers = {"replica"};
  const std::string text = Encode(c);
  EXPECT_NE(text.find(R"("buddy":true)"), std::string::npos) << text;
  CkptCopy out;
  ASSERT_TRUE(Decode(text, &out).ok());
  EXPECT_TRUE(out == c);
  EXPECT_NE(DecodeWith(c, "/buddy", 1), "") << "a bool, nothing else";
}

TEST(CommIdHexTest, RoundTrip) {
  EXPECT_EQ(CommIdHex(0), "0000000000000000");
  EXPECT_EQ(CommIdHex(0x3fa2c0ffee123456ULL), "3fa2c0ffee123456");
  EXPECT_EQ(CommIdHex(~0ULL), "ffffffffffffffff");
  uint64_t id = 7;
  EXPECT_TRUE(ParseCommIdHex("FFFFFFFFFFFFFFFF", &id));
  EXPECT_EQ(id, ~0ULL);
  id = 7;
  EXPECT_FALSE(ParseCommIdHex("fffffffffffffff", &id));
  EXPECT_FALSE(ParseCommIdHex("-fffffffffffffff", &id));
  EXPECT_EQ(id, 7u);
}

TEST(SuspectsFieldTest, RankAtNode) {
  EXPECT_EQ(SuspectsField({}), "");
  EXPECT_EQ(SuspectsField(SampleIncident().suspects), "5@node1,6@node2");
}

TEST(PrefetchCodecTest, BadReportFieldsAreNamed) {
  const PrefetchReport p = SamplePrefetch();
  EXPECT_EQ(DecodeWith(p, "/state", "paused"), "state: unknown state 'paused' (running, done)");
  EXPECT_EQ(DecodeWith(p, "/state", "running"), "");
  EXPECT_EQ(DecodeWith(p, "/step", -1), "step: must not be negative, got -1");
  EXPECT_EQ(DecodeWith(p, "/pull_s", -0.5).rfind("pull_s: ", 0), 0u);
  EXPECT_EQ(DecodeWith(p, "/ranks/0/outcome", "maybe"),
            "ranks[0].outcome: unknown outcome 'maybe' (pulled, kept, local, failed, running)");
  EXPECT_EQ(DecodeWith(p, "/ranks/1/ok", 1).rfind("ranks[1].ok: expected a boolean", 0), 0u);
  EXPECT_EQ(DecodeWith(p, "/ranks/0/bytes", -3), "ranks[0].bytes: must not be negative, got -3");
  EXPECT_EQ(DecodeWith(p, "/ranks/0/source_rank", -1), "");  // none
  EXPECT_EQ(DecodeWith(p, "/ranks/0/source_rank", -2).rfind("ranks[0].source_rank: -2 is out of range", 0), 0u);
}

TEST(PrefetchCodecTest, ARunningReportWithoutRanksDecodes) {
  PrefetchReport out;
  Status s = Decode(R"({"v":1,"node":"n2","step":40,"state":"running","started_unix_ms":7})", &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.step, 40);
  EXPECT_EQ(out.done_unix_ms, 0);
  EXPECT_TRUE(out.ranks.empty());
}

}  // namespace
}  // namespace ft::proto

namespace ft::proto {
namespace {

TEST(TransferCodecTest, BadEndpointFieldsAreNamed) {
  const TransferEndpoint e = SampleEndpoint();
  EXPECT_EQ(DecodeWith(e, "/port", 0), "port: 0 is out of range [1, 65535]");
  EXPECT_EQ(DecodeWith(e, "/port", 65536), "port: 65536 is out of range [1, 65535]");
  EXPECT_EQ(DecodeWith(e, "/port", -1), "port: must not be negative, got -1");
  EXPECT_EQ(DecodeWith(e, "/port", 65535), "");
  EXPECT_EQ(DecodeWith(e, "/address", ""), "address: must not be empty");
  EXPECT_EQ(DecodeWith(e, "/node", ""), "node: must not be empty");
  EXPECT_EQ(DecodeWith(e, "/transports/0", "ucx"), "transports[0]: unknown transport 'ucx' (tcp, verbs)");
  EXPECT_EQ(DecodeWith(e, "/transports/1", ""), "transports[1]: must not be empty");
  EXPECT_EQ(DecodeWith(e, "/transports", Json::array({"verbs"})),
            "transports: no \"tcp\" (every connection starts on the TCP control channel)");
  EXPECT_EQ(DecodeWith(e, "/transports", Json::array({"tcp"})), "");
  EXPECT_EQ(DecodeWith(e, "/transports", 1).rfind("transports: expected a list", 0), 0u);
  Json j = Json::parse(Encode(e));
  j.erase("transports");
  TransferEndpoint out;
  EXPECT_EQ(Decode(j.dump(), &out).message(), "transports: missing (required)");
  EXPECT_EQ(DecodeWith(e, "/unix_ms", -5), "unix_ms: must not be negative, got -5");
}

}  // namespace
}  // namespace ft::proto

namespace ft::proto {
namespace {

TEST(CommandCodecTest, IncarnationsRoundTripAndAreOptional) {
  Command c = SampleCommand();
  c.incarnations = {{0, 1763799990123456789ull}, {7, 18000000000000000000ull}};
  Command out;
  ASSERT_TRUE(Decode(Encode(c), &out).ok());
  EXPECT_EQ(out.incarnations, c.incarnations);
  // A command of a writer before the field names no incarnation.
  Json j = Json::parse(Encode(c));
  j.erase("incarnations");
  ASSERT_TRUE(Decode(j.dump(), &out).ok());
  EXPECT_TRUE(out.incarnations.empty());
  j["incarnations"] = Json::array({Json{{"rank", -1}, {"incarnation", 5}}});
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
}

// What the job says of its steps: written only when said, so a summary of a worker from before
// the fields (or of a job that says nothing) reads as not said, and a said value round-trips.
TEST(SummaryCodecTest, DeclaredStepsRoundTripAndAreOptional) {
  RankSummary s = SampleSummary();
  s.declared_step = 150;
  s.total_steps = 1000;
  Json j = Json::parse(Encode(s));
  EXPECT_EQ(j["declared_step"], 150);
  EXPECT_EQ(j["total_steps"], 1000);
  RankSummary out;
  ASSERT_TRUE(Decode(Encode(s), &out).ok());
  EXPECT_EQ(out.declared_step, 150);
  EXPECT_EQ(out.total_steps, 1000);
  j.erase("declared_step");
  j.erase("total_steps");
  RankSummary older;
  ASSERT_TRUE(Decode(j.dump(), &older).ok());
  EXPECT_EQ(older.declared_step, -1);
  EXPECT_EQ(older.total_steps, 0);
  EXPECT_EQ(older.ops, s.ops);
  s.declared_step = -1;
  s.total_steps = 0;
  j = Json::parse(Encode(s));
  EXPECT_FALSE(j.contains("declared_step"));
  EXPECT_FALSE(j.contains("total_steps"));
  j["total_steps"] = -5;
  EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt);
}

// The worker's slowdown verdict: written when said (0 or 1), read back as said; a summary
// without it (an older worker) reads as not said (-1); anything but -1..1 is corrupt.
TEST(SummaryCodecTest, TheSlowdownVerdictRoundTripsAndIsOptional) {
  RankSummary s = SampleSummary();
  for (int verdict : {0, 1}) {
    s.slowdown = verdict;
    Json j = Json::parse(Encode(s));
    EXPECT_EQ(j["slowdown"], verdict);
    RankSummary out;
    ASSERT_TRUE(Decode(Encode(s), &out).ok());
    EXPECT_EQ(out.slowdown, verdict);
  }
  Json j = Json::parse(Encode(s));
  j.erase("slowdown");
  RankSummary older;
  ASSERT_TRUE(Decode(j.dump(), &older).ok());
  EXPECT_EQ(older.slowdown, -1);
  s.slowdown = -1;
  EXPECT_FALSE(Json::parse(Encode(s)).contains("slowdown"));
  for (Json bad : {Json(2), Json(-2), Json("yes")}) {
    j["slowdown"] = bad;
    RankSummary out;
    EXPECT_EQ(Decode(j.dump(), &out).code(), StatusCode::kCorrupt) << bad.dump();
  }
}

}  // namespace
}  // namespace ft::proto

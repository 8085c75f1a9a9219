// The vocabularies of proto/messages.h, ckpt_codec.h, master_codec.h and prefetch_codec.h: every name parses back to its value, the two questions
// asked of a rank state answer as the decision and attribution need, and the codec refuses a
// state or kind it does not know, naming the field and the value (and accepts every known one).
#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <set>
#include <string>

#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/master_codec.h"
#include "proto/messages.h"
#include "proto/prefetch_codec.h"
#include "proto/tests/sample_values.h"

namespace ft::proto {
namespace {

using namespace ft::proto::testing;

TEST(VocabularyTest, EveryNameParsesBackAndUnknownNamesDoNot) {
  for (RankState s : {RankState::kRunning, RankState::kDisabled, RankState::kExited, RankState::kDead,
                      RankState::kStopped}) {
    EXPECT_EQ(ParseRankState(RankStateName(s)), s) << RankStateName(s);
  }
  for (EventKind k : {EventKind::kTimeout, EventKind::kError, EventKind::kExit, EventKind::kSlowdown,
                      EventKind::kBusy, EventKind::kFrozen}) {
    EXPECT_EQ(ParseEventKind(EventKindName(k)), k) << EventKindName(k);
  }
  for (IncidentKind k : {IncidentKind::kHang, IncidentKind::kHostFrozen, IncidentKind::kCrash,
                         IncidentKind::kTransportHang, IncidentKind::kBusy, IncidentKind::kStraggler,
                         IncidentKind::kSdc, IncidentKind::kRestoreMismatch, IncidentKind::kSlowLink,
                         IncidentKind::kJobSlow}) {
    EXPECT_EQ(ParseIncidentKind(IncidentKindName(k)), k) << IncidentKindName(k);
  }
  EXPECT_FALSE(ParseRankState("starting").has_value());
  EXPECT_FALSE(ParseRankState("").has_value());
  EXPECT_FALSE(ParseEventKind("Timeout").has_value());
  EXPECT_FALSE(ParseIncidentKind("host frozen").has_value());
}

// A disabled rank still runs (it can hang a collective: not gone) but has no agent to save.
TEST(VocabularyTest, GoneAndCannotSave) {
  EXPECT_FALSE(ProcessGone(RankState::kRunning));
  EXPECT_FALSE(ProcessGone(RankState::kDisabled));
  EXPECT_TRUE(ProcessGone(RankState::kExited));
  EXPECT_TRUE(ProcessGone(RankState::kDead));
  EXPECT_TRUE(ProcessGone(RankState::kStopped));
  EXPECT_FALSE(CannotSave(RankState::kRunning));
  EXPECT_TRUE(CannotSave(RankState::kDisabled));
  EXPECT_TRUE(CannotSave(RankState::kDead));
  // As names: one not reported (empty) or unknown is neither.
  EXPECT_TRUE(ProcessGone("exited"));
  EXPECT_FALSE(ProcessGone(""));
  EXPECT_FALSE(CannotSave(""));
  EXPECT_FALSE(CannotSave("unheard-of"));
}

TEST(VocabularyTest, TheCodecRefusesAnUnknownStateOrKindByName) {
  RankProgress p = SampleProgress();
  p.state = "sleeping";
  RankProgress progress_out;
  Status s = Decode(Encode(p), &progress_out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("state: unknown rank state 'sleeping'", 0), 0u) << s.ToString();

  Membership m = SampleMembership();
  m.state = "zombie";
  Membership member_out;
  s = Decode(Encode(m), &member_out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("state: unknown rank state 'zombie'", 0), 0u) << s.ToString();
  m.state.clear();  // optional: a membership may say nothing of the state
  EXPECT_TRUE(Decode(Encode(m), &member_out).ok());

  Event e = SampleEvent();
  e.kind = "teleport";
  Event event_out;
  s = Decode(Encode(e), &event_out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("kind: unknown event kind 'teleport'", 0), 0u) << s.ToString();

  Incident i = SampleIncident();
  i.kind = "meltdown";
  Incident incident_out;
  s = Decode(Encode(i), &incident_out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("kind: unknown incident kind 'meltdown'", 0), 0u) << s.ToString();
}

TEST(VocabularyTest, EveryKnownStateAndKindDecodes) {
  for (RankState st : {RankState::kRunning, RankState::kDisabled, RankState::kExited, RankState::kDead,
                       RankState::kStopped}) {
    RankProgress p = SampleProgress();
    p.state = RankStateName(st);
    RankProgress out;
    EXPECT_TRUE(Decode(Encode(p), &out).ok()) << p.state;
  }
  for (EventKind k : {EventKind::kTimeout, EventKind::kError, EventKind::kExit, EventKind::kSlowdown,
                      EventKind::kBusy, EventKind::kFrozen}) {
    Event e = SampleEvent();
    e.kind = EventKindName(k);
    Event out;
    EXPECT_TRUE(Decode(Encode(e), &out).ok()) << e.kind;
  }
  for (IncidentKind k : {IncidentKind::kHang, IncidentKind::kHostFrozen, IncidentKind::kCrash,
                         IncidentKind::kTransportHang, IncidentKind::kBusy, IncidentKind::kStraggler,
                         IncidentKind::kSdc, IncidentKind::kRestoreMismatch, IncidentKind::kSlowLink,
                         IncidentKind::kJobSlow}) {
    Incident i = SampleIncident();
    i.kind = IncidentKindName(k);
    Incident out;
    EXPECT_TRUE(Decode(Encode(i), &out).ok()) << i.kind;
  }
}

// A verdict's reasons (proto/ckpt_codec.h): every name parses back and no two share one; they
// travel in why's order, are not written when there are none (an older master's verdict), and a
// name this reader does not know (a newer master's) is dropped while the verdict still decodes.
TEST(VocabularyTest, VerdictReasonsTravelInOrderAndAnUnknownOneIsDropped) {
  std::set<std::string> names;
  for (VerdictReason r : kVerdictReasons) {
    EXPECT_EQ(ParseVerdictReason(VerdictReasonName(r)), r) << VerdictReasonName(r);
    EXPECT_TRUE(names.insert(VerdictReasonName(r)).second) << VerdictReasonName(r);
  }
  EXPECT_FALSE(ParseVerdictReason("Accepted").has_value());
  EXPECT_FALSE(ParseVerdictReason("").has_value());

  StepVerdict v = SampleVerdict();
  EXPECT_EQ(Encode(v).find("reasons"), std::string::npos) << "none known: not written";
  v.reasons = {VerdictReason::kAccepted, VerdictReason::kSilentDataCorruption, VerdictReason::kTornIgnored};
  const std::string text = Encode(v);
  EXPECT_NE(text.find(R"("reasons":["accepted","sdc","torn-ignored"])"), std::string::npos) << text;
  StepVerdict out;
  Status s = Decode(text, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, v);
  EXPECT_TRUE(out.Has(VerdictReason::kTornIgnored));
  EXPECT_FALSE(out.Has(VerdictReason::kSingleCopy));

  std::string newer = text;
  newer.replace(newer.find(R"("sdc")"), 5, R"("cosmic-ray")");
  s = Decode(newer, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.reasons, (std::vector<VerdictReason>{VerdictReason::kAccepted, VerdictReason::kTornIgnored}));

  std::string garbled = text;
  garbled.replace(garbled.find(R"("sdc")"), 5, "7");
  s = Decode(garbled, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("reasons[1]: expected a string", 0), 0u) << s.ToString();
}

// A state as it travels is one state, or none when empty or unknown.
TEST(VocabularyTest, ARankStateNameIsItsState) {
  EXPECT_TRUE(Is("stopped", RankState::kStopped));
  EXPECT_FALSE(Is("stopped", RankState::kExited));
  EXPECT_FALSE(Is("", RankState::kRunning));
  EXPECT_FALSE(Is("Exited", RankState::kExited));
}

// Op kinds (messages.h): every name parses back and no two share one; "" is no name (the codec
// reads an empty optional op as kNone itself); HasRoot answers by kind.
TEST(VocabularyTest, EveryOpKindNameParsesBackAndUnknownNamesDoNot) {
  std::set<std::string> names;
  for (OpKind k : kOpKinds) {
    EXPECT_EQ(ParseOpKind(OpKindName(k)), k) << OpKindName(k);
    EXPECT_TRUE(names.insert(OpKindName(k)).second) << OpKindName(k);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(OpKind::kOther) + 1) << "kOpKinds lists every kind";
  EXPECT_FALSE(ParseOpKind("").has_value());
  EXPECT_FALSE(ParseOpKind("AllReduce").has_value());
  EXPECT_FALSE(ParseOpKind("op21").has_value());
  for (OpKind k : {OpKind::kBroadcast, OpKind::kBcast, OpKind::kReduce, OpKind::kGather, OpKind::kScatter}) {
    EXPECT_TRUE(HasRoot(k)) << OpKindName(k);
  }
  for (OpKind k : {OpKind::kNone, OpKind::kAllReduce, OpKind::kAllGather, OpKind::kReduceScatter,
                   OpKind::kAlltoAll, OpKind::kSend, OpKind::kRecv, OpKind::kGraphLaunch, OpKind::kOther}) {
    EXPECT_FALSE(HasRoot(k)) << OpKindName(k);
  }
}

// Every kind survives each of the four values that carry one, as its name.
TEST(VocabularyTest, EveryOpKindRoundTripsInEveryValue) {
  for (OpKind k : kOpKinds) {
    const std::string name = std::string(R"("op":")") + OpKindName(k) + "\"";
    RankProgress p = SampleProgress();
    p.comms.at(0).op = k;
    RankProgress p_out;
    ASSERT_TRUE(Decode(Encode(p), &p_out).ok()) << OpKindName(k);
    EXPECT_EQ(p_out, p);
    EXPECT_NE(Encode(p).find(name), std::string::npos) << Encode(p);

    Event e = SampleEvent();
    e.op = k;
    Event e_out;
    ASSERT_TRUE(Decode(Encode(e), &e_out).ok()) << OpKindName(k);
    EXPECT_EQ(e_out, e);

    RankSummary s = SampleSummary();
    s.ops.at(0).op = k;
    RankSummary s_out;
    ASSERT_TRUE(Decode(Encode(s), &s_out).ok()) << OpKindName(k);
    EXPECT_EQ(s_out, s);
    EXPECT_NE(Encode(s).find(name), std::string::npos) << Encode(s);

    TimeoutTable t = SampleTimeouts();
    t.entries.at(1).op = k;
    TimeoutTable t_out;
    ASSERT_TRUE(Decode(Encode(t), &t_out).ok()) << OpKindName(k);
    EXPECT_EQ(t_out, t);
  }
  // An event not about an op says nothing of one.
  Event exit = SampleEvent();
  exit.kind = EventKindName(EventKind::kExit);
  exit.op = OpKind::kNone;
  exit.progress = RankProgress{};  // its rows carry ops of their own
  EXPECT_EQ(Encode(exit).find(R"("op")"), std::string::npos) << Encode(exit);
}

// An op name this build does not know but that is a name (a newer libft.so's op, during a rolling
// upgrade) is `other`: the event, progress table, summary or timeout table that carries it is
// kept whole — the master does not drop a timeout for one new op.
TEST(VocabularyTest, ANewerOpNameIsOther) {
  auto rename = [](std::string text, const std::string& from) {
    const size_t at = text.find(R"("op":")" + from + "\"");
    EXPECT_NE(at, std::string::npos) << text;
    if (at != std::string::npos) text.replace(at, 7 + from.size(), R"("op":"allreducev2")");
    return text;
  };
  Event e = SampleEvent();
  Event e_out;
  Status s = Decode(rename(Encode(e), OpKindName(e.op)), &e_out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(e_out.op, OpKind::kOther);
  EXPECT_EQ(e_out.rank, e.rank);
  RankProgress p = SampleProgress();
  RankProgress p_out;
  ASSERT_TRUE(Decode(rename(Encode(p), OpKindName(p.comms.at(0).op)), &p_out).ok());
  EXPECT_EQ(p_out.comms.at(0).op, OpKind::kOther);
  EXPECT_EQ(p_out.comms.size(), p.comms.size());
  TimeoutTable t = SampleTimeouts();
  TimeoutTable t_out;
  ASSERT_TRUE(Decode(rename(Encode(t), OpKindName(t.entries.at(0).op)), &t_out).ok());
  EXPECT_EQ(t_out.entries.at(0).op, OpKind::kOther);
  // Not a name: too long, or other characters.
  EXPECT_FALSE(Decode(R"({"v":1,"kind":"timeout","rank":1,"node":"n","unix_ms":1,"op":"ALLREDUCE"})", &e_out).ok());
  EXPECT_FALSE(Decode(R"({"v":1,"kind":"timeout","rank":1,"node":"n","unix_ms":1,"op":")" + std::string(33, 'a') +
                          R"("})", &e_out).ok());
}

// A name that is no op name (damage: not lowercase letters and digits) is refused, naming the
// field and the value, wherever an op travels; an empty one is no op where the field is optional
// and refused where it is required.
TEST(VocabularyTest, TheCodecRefusesAGarbledOpKindByName) {
  auto garble = [](std::string text, const std::string& from) {
    const size_t at = text.find(R"("op":")" + from + "\"");
    EXPECT_NE(at, std::string::npos) << text;
    if (at != std::string::npos) text.replace(at, 7 + from.size(), R"("op":"tele port")");
    return text;
  };
  auto prefix = [](const Status& s, const std::string& want) {
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.ToString();
    EXPECT_EQ(s.message().rfind(want, 0), 0u) << s.ToString();
    EXPECT_NE(s.message().find("(none, allreduce, allgather,"), std::string::npos) << s.ToString();
  };
  RankProgress p = SampleProgress();
  RankProgress p_out = p;
  prefix(Decode(garble(Encode(p), OpKindName(p.comms.at(0).op)), &p_out), "comms[0].op: unknown op kind 'tele port'");
  EXPECT_EQ(p_out, p) << "untouched on failure";

  Event e = SampleEvent();
  Event e_out;
  prefix(Decode(garble(Encode(e), OpKindName(e.op)), &e_out), "op: unknown op kind 'tele port'");
  std::string nested = Encode(e);
  nested.replace(nested.rfind(R"("op":")"), 7 + std::string(OpKindName(e.progress.comms.back().op)).size(),
                 R"("op":"tele port")");
  prefix(Decode(nested, &e_out), "progress.comms[" + std::to_string(e.progress.comms.size() - 1) +
                                     "].op: unknown op kind 'tele port'");

  RankSummary s = SampleSummary();
  RankSummary s_out;
  prefix(Decode(garble(Encode(s), OpKindName(s.ops.at(0).op)), &s_out), "ops[0].op: unknown op kind 'tele port'");

  TimeoutTable t = SampleTimeouts();
  TimeoutTable t_out;
  prefix(Decode(garble(Encode(t), OpKindName(t.entries.at(0).op)), &t_out),
         "entries[0].op: unknown op kind 'tele port'");

  // Empty: no op in a progress row and an event (optional), refused in a summary and a table.
  ASSERT_TRUE(Decode(R"({"v":1,"kind":"exit","rank":1,"node":"n","unix_ms":1,"op":""})", &e_out).ok());
  EXPECT_EQ(e_out.op, OpKind::kNone);
  Status empty = Decode(R"({"v":1,"version":1,"default_ms":1,"entries":[{"comm":"0000000000000001","op":"","ms":1}]})",
                        &t_out);
  EXPECT_EQ(empty.message().rfind("entries[0].op: must not be empty", 0), 0u) << empty.ToString();
}

// Bytes today's readers find in Redis, written by the encoder of strings (before OpKind and
// VerdictState): they decode to the kinds and states named, and encode back to the same bytes.
TEST(VocabularyTest, ValuesWrittenAsStringsDecodeToTheSameKindsAndStates) {
  const std::string progress =
      R"({"v":1,"rank":3,"node":"node1","pid":4242,"incarnation":2,"state":"running","observed_unix_ms":1763800000000,)"
      R"("last_call_age_ms":12.5,"blocked_ms":0.0,"cpu_pct":97.0,"busy":false,"heartbeat_age_ms":-1.0,"frozen":false,)"
      R"("comms":[{"comm":"0000000000003fa2","p2p":false,"comm_rank":3,"comm_size":8,"op":"allreduce","bytes":4194304,)"
      R"("peer":-1,"entered":812,"started":812,"completed":811,"entered_age_ms":2100.0,"started_age_ms":2099.0,)"
      R"("completed_age_ms":2150.0},{"comm":"0000000000000077","p2p":true,"comm_rank":1,"comm_size":2,"op":"recv",)"
      R"("bytes":8388608,"peer":0,"entered":40,"started":40,"completed":40,"entered_age_ms":-1.0,"started_age_ms":-1.0,)"
      R"("completed_age_ms":-1.0},{"comm":"0000000000000099","p2p":false,"comm_rank":0,"comm_size":4,"op":"none",)"
      R"("bytes":0,"peer":-1,"entered":0,"started":0,"completed":0,"entered_age_ms":-1.0,"started_age_ms":-1.0,)"
      R"("completed_age_ms":-1.0}]})";
  RankProgress p;
  ASSERT_TRUE(Decode(progress, &p).ok());
  ASSERT_EQ(p.comms.size(), 3u);
  EXPECT_EQ(p.comms[0].op, OpKind::kAllReduce);
  EXPECT_EQ(p.comms[1].op, OpKind::kRecv);
  EXPECT_EQ(p.comms[2].op, OpKind::kNone);
  EXPECT_EQ(Encode(p), progress);

  const std::string timeout =
      R"({"v":1,"kind":"timeout","rank":3,"node":"node1","unix_ms":1763800000100,"message":"",)"
      R"("comm":"0000000000003fa2","op":"broadcast","seq":812,"age_ms":2100.0,"timeout_ms":2000.0,"started":true})";
  const std::string exit =
      R"({"v":1,"kind":"exit","rank":3,"node":"node1","unix_ms":1763800000200,"message":"","code":-9,"clean":false})";
  Event e;
  ASSERT_TRUE(Decode(timeout, &e).ok());
  EXPECT_EQ(e.op, OpKind::kBroadcast);
  EXPECT_EQ(Encode(e), timeout);
  ASSERT_TRUE(Decode(exit, &e).ok());
  EXPECT_EQ(e.op, OpKind::kNone);
  EXPECT_EQ(Encode(e), exit);

  const std::string summary =
      R"({"v":1,"rank":3,"node":"node1","unix_ms":1763800000300,"steps":10,"step_ms":0.0,"step_p50_ms":0.0,)"
      R"("compute_ms":0.0,"comm_wait_ms":0.0,"records":0,"dropped":0,"ops":[{"comm":"0000000000003fa2",)"
      R"("op":"reducescatter","bucket":2,"count":5,"p10_ms":1.25,"p50_ms":1.5,"p99_ms":2.0,"max_ms":2.5,"last_seq":811},)"
      R"({"comm":"0000000000003fa2","op":"send","bucket":3,"count":5,"p10_ms":-1.0,"p50_ms":1.5,"p99_ms":2.0,"max_ms":2.5,)"
      R"("last_seq":811}],"kernels":0,"kernel_samples":[]})";
  RankSummary s;
  ASSERT_TRUE(Decode(summary, &s).ok());
  ASSERT_EQ(s.ops.size(), 2u);
  EXPECT_EQ(s.ops[0].op, OpKind::kReduceScatter);
  EXPECT_EQ(s.ops[1].op, OpKind::kSend);
  EXPECT_DOUBLE_EQ(s.ops[0].p10_ms, 1.25);
  EXPECT_LT(s.ops[1].p10_ms, 0) << "not reported";
  EXPECT_EQ(Encode(s), summary);

  const std::string table =
      R"({"v":1,"version":4,"default_ms":30000.0,"unix_ms":1763800000400,"entries":[{"comm":"0000000000003fa2",)"
      R"("op":"allgather","bucket":1,"ms":1500.0},{"comm":"0000000000000077","op":"graphlaunch","bucket":0,"ms":900.0}]})";
  TimeoutTable t;
  ASSERT_TRUE(Decode(table, &t).ok());
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_EQ(t.entries[0].op, OpKind::kAllGather);
  EXPECT_EQ(t.entries[1].op, OpKind::kGraphLaunch);
  EXPECT_EQ(Encode(t), table);

  for (VerdictState state : kVerdictStates) {
    const std::string verdict = std::string(R"({"v":1,"step":1200,"state":")") + VerdictStateName(state) +
                                R"(","shards":4,"verified_shards":2,"copies":6,"sdc_ranks":[],"why":"w","unix_ms":1763800001100})";
    StepVerdict v;
    ASSERT_TRUE(Decode(verdict, &v).ok()) << verdict;
    EXPECT_EQ(v.state, state);
    EXPECT_EQ(Encode(v), verdict);
  }
}

// A verdict's state: one of three names, each parsing back; an unknown one is refused by name
// (a step is never planned from a state this build does not understand).
TEST(VocabularyTest, VerdictStatesParseBackAndAnUnknownOneIsRefused) {
  std::set<std::string> names;
  for (VerdictState st : kVerdictStates) {
    EXPECT_EQ(ParseVerdictState(VerdictStateName(st)), st) << VerdictStateName(st);
    EXPECT_TRUE(names.insert(VerdictStateName(st)).second) << VerdictStateName(st);
  }
  EXPECT_EQ(names, (std::set<std::string>{"verified", "untrusted", "incomplete"}));
  EXPECT_FALSE(ParseVerdictState("Verified").has_value());
  EXPECT_FALSE(ParseVerdictState("").has_value());

  std::string text = Encode(SampleVerdict());
  text.replace(text.find(R"("verified")"), 10, R"("trusted")");
  StepVerdict out;
  Status s = Decode(text, &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message().rfind("state: unknown state 'trusted' (verified, untrusted, incomplete)", 0), 0u)
      << s.ToString();
}

// Every value of a vocabulary by its name: each parses back, no two share one, and the names
// are the ones on the wire (a literal: renaming one is a schema change).
template <typename E, size_t N>
std::set<std::string> NamesParsingBack(const std::array<E, N>& all, const char* (*name_of)(E),
                                       std::optional<E> (*parse)(std::string_view)) {
  std::set<std::string> names;
  for (E e : all) {
    EXPECT_EQ(parse(name_of(e)), e) << name_of(e);
    EXPECT_TRUE(names.insert(name_of(e)).second) << name_of(e);
  }
  return names;
}

TEST(VocabularyTest, TheMasterAndPrefetchVocabulariesParseBack) {
  EXPECT_EQ(NamesParsingBack(kJobStates, JobStateName, ParseJobState),
            (std::set<std::string>{"running", "stopping", "stopped", "finished"}));
  EXPECT_EQ(NamesParsingBack(kDecisionKinds, DecisionKindName, ParseDecisionKind),
            (std::set<std::string>{"none", "save-then-stop", "stop"}));
  EXPECT_EQ(NamesParsingBack(kActionPhases, ActionPhaseName, ParseActionPhase),
            (std::set<std::string>{"save", "stop", "done"}));
  EXPECT_EQ(NamesParsingBack(kPrefetchStates, PrefetchStateName, ParsePrefetchState),
            (std::set<std::string>{"running", "done"}));
  EXPECT_EQ(NamesParsingBack(kPrefetchOutcomes, PrefetchOutcomeName, ParsePrefetchOutcome),
            (std::set<std::string>{"pulled", "kept", "local", "failed", "running"}));
  EXPECT_FALSE(ParseJobState("Running").has_value());
  EXPECT_FALSE(ParseJobState("").has_value());
  EXPECT_FALSE(ParseDecisionKind("save_then_stop").has_value());
  EXPECT_FALSE(ParseActionPhase("saving").has_value());
  EXPECT_FALSE(ParsePrefetchState("finished").has_value());
  EXPECT_FALSE(ParsePrefetchOutcome("done").has_value());
}

// The one question asked of each: has the job ended, where does an action start, does the
// prefetch arena hold the planned copy.
TEST(VocabularyTest, TheQuestionsAskedOfThem) {
  EXPECT_FALSE(JobEnded(JobState::kRunning));
  EXPECT_FALSE(JobEnded(JobState::kStopping));
  EXPECT_TRUE(JobEnded(JobState::kStopped));
  EXPECT_TRUE(JobEnded(JobState::kFinished));
  EXPECT_EQ(FirstPhase(DecisionKind::kSaveThenStop), ActionPhase::kSave);
  EXPECT_EQ(FirstPhase(DecisionKind::kStop), ActionPhase::kStop);
  EXPECT_TRUE(InPrefetchArena(PrefetchOutcome::kPulled));
  EXPECT_TRUE(InPrefetchArena(PrefetchOutcome::kKept));
  EXPECT_FALSE(InPrefetchArena(PrefetchOutcome::kLocal));  // this node's own copy, not the prefetch arena
  EXPECT_FALSE(InPrefetchArena(PrefetchOutcome::kFailed));
  EXPECT_FALSE(InPrefetchArena(PrefetchOutcome::kRunning));
}

// job_state is a plain string: every state decodes from its name; anything else, empty
// included, is refused naming the value and the states.
TEST(VocabularyTest, AJobStateDecodesFromItsNameOnly) {
  for (JobState st : kJobStates) {
    JobState out = st == JobState::kRunning ? JobState::kFinished : JobState::kRunning;
    ASSERT_TRUE(DecodeJobState(JobStateName(st), &out).ok()) << JobStateName(st);
    EXPECT_EQ(out, st);
  }
  JobState out = JobState::kStopping;
  Status s = DecodeJobState("paused", &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "job_state: unknown job state 'paused' (running, stopping, stopped, finished)");
  EXPECT_EQ(out, JobState::kStopping) << "untouched on failure";
  EXPECT_EQ(DecodeJobState("", &out).code(), StatusCode::kCorrupt);
  EXPECT_EQ(DecodeJobState("finished ", &out).code(), StatusCode::kCorrupt);
}

// An action's decision and phase: every pair round trips; an unknown name is refused by name,
// and so is "none" (an action decided something).
TEST(VocabularyTest, AnActionRefusesAnUnknownDecisionOrPhaseByName) {
  for (DecisionKind d : {DecisionKind::kSaveThenStop, DecisionKind::kStop}) {
    for (ActionPhase p : kActionPhases) {
      MasterAction a = SampleAction();
      a.decision = d;
      a.phase = p;
      const std::string text = Encode(a);
      EXPECT_NE(text.find(std::string(R"("decision":")") + DecisionKindName(d) + "\""), std::string::npos) << text;
      EXPECT_NE(text.find(std::string(R"("phase":")") + ActionPhaseName(p) + "\""), std::string::npos) << text;
      MasterAction out;
      ASSERT_TRUE(Decode(text, &out).ok()) << text;
      EXPECT_EQ(out, a);
    }
  }
  const std::string text = Encode(SampleAction());
  auto with = [&text](const std::string& from, const std::string& to) {
    std::string garbled = text;
    garbled.replace(garbled.find(from), from.size(), to);
    return garbled;
  };
  MasterAction out;
  Status s = Decode(with(R"("decision":"save-then-stop")", R"("decision":"save-and-stop")"), &out);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.message(), "decision: unknown decision 'save-and-stop' (save-then-stop, stop)");
  s = Decode(with(R"("decision":"save-then-stop")", R"("decision":"none")"), &out);
  EXPECT_EQ(s.message(), "decision: unknown decision 'none' (save-then-stop, stop)");
  s = Decode(with(R"("decision":"save-then-stop")", R"("decision":"")"), &out);
  EXPECT_EQ(s.message(), "decision: must not be empty");
  s = Decode(with(R"("phase":"stop")", R"("phase":"Stop")"), &out);
  EXPECT_EQ(s.message(), "phase: unknown phase 'Stop' (save, stop, done)");
  EXPECT_EQ(out, MasterAction{}) << "untouched on failure";
}

// A prefetch report's state and every outcome round trip; unknown ones are refused by name
// (PrefetchCodecTest names the fields).
TEST(VocabularyTest, EveryPrefetchStateAndOutcomeRoundTrips) {
  for (PrefetchState st : kPrefetchStates) {
    for (PrefetchOutcome o : kPrefetchOutcomes) {
      PrefetchReport p = SamplePrefetch();
      p.state = st;
      p.ranks.at(1).outcome = o;
      PrefetchReport out;
      ASSERT_TRUE(Decode(Encode(p), &out).ok()) << PrefetchStateName(st) << " " << PrefetchOutcomeName(o);
      EXPECT_EQ(out, p);
    }
  }
}

// Bytes today's readers find in Redis, written when these fields were strings: they decode to
// the values named and encode back to the same bytes.
TEST(VocabularyTest, ActionsAndPrefetchReportsWrittenAsStringsDecodeToTheSameValues) {
  const std::string save =
      R"({"v":1,"incident":"1763800000000-hang","decision":"save-then-stop","save":["node-a:3",":7"],)"
      R"("phase":"save","sent":false,"acks_from":"","deadline_unix_ms":0,"nodes":[],"decided_unix_ms":1763800000900})";
  const std::string done =
      R"({"v":1,"incident":"9-crash","decision":"stop","save":[],"phase":"done","sent":true,)"
      R"("acks_from":"9-0","deadline_unix_ms":15009,"nodes":["n0","n1"],"decided_unix_ms":9})";
  MasterAction a;
  ASSERT_TRUE(Decode(save, &a).ok());
  EXPECT_EQ(a.decision, DecisionKind::kSaveThenStop);
  EXPECT_EQ(a.phase, ActionPhase::kSave);
  EXPECT_EQ(Encode(a), save);
  ASSERT_TRUE(Decode(done, &a).ok());
  EXPECT_EQ(a.decision, DecisionKind::kStop);
  EXPECT_EQ(a.phase, ActionPhase::kDone);
  EXPECT_EQ(Encode(a), done);

  const std::string report =
      R"({"v":1,"node":"node2","step":1200,"state":"running","started_unix_ms":1763800002000,"done_unix_ms":0,)"
      R"("pull_s":0.0,"ranks":[{"rank":4,"outcome":"pulled","ok":true,"bytes":67108864,"seconds":1.25,)"
      R"("source":"node0","source_rank":0,"transport":"tcp","error":""},{"rank":5,"outcome":"kept","ok":true,)"
      R"("bytes":0,"seconds":0.0,"source":"","source_rank":3,"transport":"","error":""},{"rank":6,"outcome":"local",)"
      R"("ok":true,"bytes":0,"seconds":0.0,"source":"","source_rank":-1,"transport":"","error":""},{"rank":7,)"
      R"("outcome":"failed","ok":false,"bytes":0,"seconds":0.5,"source":"","source_rank":-1,"transport":"",)"
      R"("error":"no source"},{"rank":8,"outcome":"running","ok":false,"bytes":0,"seconds":0.0,"source":"",)"
      R"("source_rank":-1,"transport":"","error":""}]})";
  PrefetchReport p;
  ASSERT_TRUE(Decode(report, &p).ok());
  EXPECT_EQ(p.state, PrefetchState::kRunning);
  ASSERT_EQ(p.ranks.size(), 5u);
  EXPECT_EQ(p.ranks[0].outcome, PrefetchOutcome::kPulled);
  EXPECT_EQ(p.ranks[1].outcome, PrefetchOutcome::kKept);
  EXPECT_EQ(p.ranks[2].outcome, PrefetchOutcome::kLocal);
  EXPECT_EQ(p.ranks[3].outcome, PrefetchOutcome::kFailed);
  EXPECT_EQ(p.ranks[4].outcome, PrefetchOutcome::kRunning);
  EXPECT_EQ(Encode(p), report);
  std::string finished = report;
  finished.replace(finished.find(R"("state":"running")"), 17, R"("state":"done")");
  ASSERT_TRUE(Decode(finished, &p).ok());
  EXPECT_EQ(p.state, PrefetchState::kDone);
  EXPECT_EQ(Encode(p), finished);
}

}  // namespace
}  // namespace ft::proto

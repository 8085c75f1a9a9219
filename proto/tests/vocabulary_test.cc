// The vocabularies of proto/messages.h: every name parses back to its value, the two questions
// asked of a rank state answer as the decision and attribution need, and the codec refuses a
// state or kind it does not know, naming the field and the value (and accepts every known one).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "proto/ckpt_codec.h"
#include "proto/codec.h"
#include "proto/messages.h"
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
                         IncidentKind::kSdc}) {
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
                         IncidentKind::kSdc}) {
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

}  // namespace
}  // namespace ft::proto

// CommandRunner: which mailbox command each kind becomes, how the process's result is named in
// the ack, and how long each kind waits for it. The process side is played by the test through
// the segment's mailbox (TakeCommand / AckCommand, as libft.so's agent does).
#include "ftworker/command_runner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ftworker/monitor/tests/test_util.h"
#include "shm/mailbox.h"

namespace ft::worker {
namespace {

using namespace ft::worker::testing;

constexpr int kPid = 3'900'201;  // a fake pid: FakeProbe answers for it
constexpr int64_t kT0 = 1'700'000'000'000;

class CommandRunnerTest : public ::testing::Test {
 protected:
  CommandRunnerTest() : job_(UniqueJob("cr")), rank_(job_, 0, kPid, "n1"), monitor_(MonitorOptions(job_, &probe_)) {
    std::vector<proto::Event> events;
    monitor_.Tick(MonoNs(), kT0, &events);
  }

  static proto::Command Make(const std::string& kind, const std::string& id) {
    proto::Command c;
    c.id = id;
    c.kind = kind;
    c.rank = 0;
    c.text = "save-17";
    return c;
  }

  // The process takes the oldest command from its mailbox.
  std::optional<shm::Command> Take() { return shm::TakeCommand(rank_.seg()); }

  std::string job_;
  FakeProbe probe_;
  FakeRank rank_;
  NodeMonitor monitor_;
  CommandRunner runner_{&monitor_, "n1", 30'000};
  std::vector<proto::CommandAck> acks_;
};

TEST(AckResultNameTest, NamesEveryResultTheAgentGives) {
  auto name = [](int32_t code) { return std::string(proto::AckResultName(AckResultOfMailbox(code))); };
  EXPECT_EQ(name(0), "done");
  EXPECT_EQ(name(static_cast<int32_t>(StatusCode::kUnsupported)), "not_supported");
  EXPECT_EQ(name(static_cast<int32_t>(StatusCode::kNotFound)), "nothing_registered");
  EXPECT_EQ(name(static_cast<int32_t>(StatusCode::kNotReady)), "scheduled");
  EXPECT_EQ(name(static_cast<int32_t>(StatusCode::kIoError)), "failed");
}

TEST_F(CommandRunnerTest, SaveAtStepBecomesItsMailboxCommand) {
  runner_.Execute(Make("save-at-step", "periodic-1"), kT0, &acks_);
  EXPECT_TRUE(acks_.empty());
  auto cmd = Take();
  ASSERT_TRUE(cmd.has_value());
  EXPECT_EQ(cmd->type, static_cast<uint32_t>(shm::CommandType::kSaveAtStep));
  EXPECT_STREQ(reinterpret_cast<const char*>(cmd->payload), "save-17");

  runner_.Execute(Make("save", "inc-1"), kT0, &acks_);
  shm::AckCommand(rank_.seg(), cmd->seq, 0, "saved step=12 digest=00000000deadbeef torn=0 bytes=4096 ms=3");
  cmd = Take();
  ASSERT_TRUE(cmd.has_value());
  EXPECT_EQ(cmd->type, static_cast<uint32_t>(shm::CommandType::kSave));
}

// A kind this release does not know (a newer master's) is answered at once, not left to the
// master's deadline, and nothing reaches the rank's mailbox.
TEST_F(CommandRunnerTest, AnUnknownKindIsAnsweredNotSupported) {
  runner_.Execute(Make("defragment", "new-1"), kT0, &acks_);
  ASSERT_EQ(acks_.size(), 1u);
  EXPECT_EQ(acks_[0].id, "new-1");
  EXPECT_EQ(acks_[0].result, "not_supported");
  EXPECT_NE(acks_[0].message.find("unknown command kind 'defragment'"), std::string::npos) << acks_[0].message;
  EXPECT_FALSE(Take().has_value());
  for (proto::CommandKind k : {proto::CommandKind::kStop, proto::CommandKind::kSave, proto::CommandKind::kSaveAtStep,
                               proto::CommandKind::kStacks, proto::CommandKind::kMessage}) {
    EXPECT_EQ(proto::ParseCommandKind(proto::CommandKindName(k)), k) << proto::CommandKindName(k);
  }
}

// A save's ack carries the copy typed besides its message; a message command's does not.
TEST_F(CommandRunnerTest, ASaveAckCarriesItsCopyTyped) {
  runner_.Execute(Make("save", "inc-1"), kT0, &acks_);
  auto cmd = Take();
  ASSERT_TRUE(cmd.has_value());
  shm::AckCommand(rank_.seg(), cmd->seq, 0, "saved step=12 digest=00000000deadbeef torn=1 bytes=4096 ms=3");
  runner_.Poll(kT0 + 5, &acks_);
  ASSERT_EQ(acks_.size(), 1u);
  ASSERT_TRUE(acks_[0].saved.has_value());
  EXPECT_EQ(*acks_[0].saved, (proto::SavedCopy{12, 0xdeadbeef, true, 4096, 3}));

  runner_.Execute(Make("message", "m-1"), kT0, &acks_);
  cmd = Take();
  ASSERT_TRUE(cmd.has_value());
  shm::AckCommand(rank_.seg(), cmd->seq, 0, "saved step=1");
  runner_.Poll(kT0 + 10, &acks_);
  ASSERT_EQ(acks_.size(), 2u);
  EXPECT_FALSE(acks_[1].saved.has_value());
}

// The ack message (step and digest) passes through unchanged; kNotFound is "nothing_registered".
TEST_F(CommandRunnerTest, AckResultsAndMessagesPassThrough) {
  runner_.Execute(Make("save", "inc-1"), kT0, &acks_);
  auto cmd = Take();
  ASSERT_TRUE(cmd.has_value());
  const std::string saved = "saved step=12 digest=00000000deadbeef torn=0 bytes=4096 ms=3";
  shm::AckCommand(rank_.seg(), cmd->seq, 0, saved);
  runner_.Poll(kT0 + 5, &acks_);
  ASSERT_EQ(acks_.size(), 1u);
  EXPECT_EQ(acks_[0].result, "done");
  EXPECT_EQ(acks_[0].message, saved);
  EXPECT_EQ(acks_[0].id, "inc-1");
  EXPECT_EQ(acks_[0].rank, 0);

  runner_.Execute(Make("save", "inc-2"), kT0, &acks_);
  cmd = Take();
  ASSERT_TRUE(cmd.has_value());
  shm::AckCommand(rank_.seg(), cmd->seq, static_cast<int32_t>(StatusCode::kNotFound), "nothing registered");
  runner_.Poll(kT0 + 10, &acks_);
  ASSERT_EQ(acks_.size(), 2u);
  EXPECT_EQ(acks_[1].result, "nothing_registered");
  EXPECT_EQ(acks_[1].message, "nothing registered");
}

// A save is waited for up to FT_SAVE_DEADLINE, not the 10 s of a message; a save at the next
// step up to 10 min.
TEST_F(CommandRunnerTest, EachKindWaitsAsLongAsItMay) {
  runner_.Execute(Make("message", "m-1"), kT0, &acks_);
  runner_.Execute(Make("save", "s-1"), kT0, &acks_);
  runner_.Execute(Make("save-at-step", "p-1"), kT0, &acks_);
  ASSERT_EQ(runner_.in_flight(), 3u);

  runner_.Poll(kT0 + 10'001, &acks_);
  ASSERT_EQ(acks_.size(), 1u);
  EXPECT_EQ(acks_[0].id, "m-1");
  EXPECT_EQ(acks_[0].result, "failed");

  runner_.Poll(kT0 + 29'000, &acks_);
  EXPECT_EQ(acks_.size(), 1u) << "a save still runs after 29 s of a 30 s deadline";
  runner_.Poll(kT0 + 30'001, &acks_);
  ASSERT_EQ(acks_.size(), 2u);
  EXPECT_EQ(acks_[1].id, "s-1");
  EXPECT_EQ(acks_[1].result, "failed");
  EXPECT_NE(acks_[1].message.find("save within 30 s"), std::string::npos) << acks_[1].message;

  runner_.Poll(kT0 + 9 * 60'000, &acks_);
  EXPECT_EQ(acks_.size(), 2u) << "a save at the next step may wait for a long step";
  runner_.Poll(kT0 + 10 * 60'000 + 1, &acks_);
  ASSERT_EQ(acks_.size(), 3u);
  EXPECT_EQ(acks_[2].id, "p-1");
  EXPECT_EQ(acks_[2].result, "failed");
  EXPECT_EQ(runner_.in_flight(), 0u);
}

// A process that ends after its save was posted (a launcher's teardown, a crash) never answers:
// the save fails at the next poll after the worker saw it end, not at the deadline, so the
// master's action does not wait out FT_SAVE_DEADLINE for the dead.
TEST_F(CommandRunnerTest, ASaveToAProcessThatEndsFailsAtOnce) {
  runner_.Execute(Make("save", "s-gone"), kT0, &acks_);
  ASSERT_EQ(runner_.in_flight(), 1u);
  runner_.Poll(kT0 + 100, &acks_);
  EXPECT_TRUE(acks_.empty()) << "the process is alive and saving";
  probe_.procs[kPid].exists = false;
  std::vector<proto::Event> events;
  monitor_.Tick(MonoNs(), kT0 + 200, &events);
  runner_.Poll(kT0 + 250, &acks_);
  ASSERT_EQ(acks_.size(), 1u);
  EXPECT_EQ(acks_[0].id, "s-gone");
  EXPECT_EQ(acks_[0].result, "failed");
  EXPECT_EQ(acks_[0].message, "rank 0 ended before it acknowledged the save");
  EXPECT_EQ(runner_.in_flight(), 0u);
}

// The rule itself: a named rank must run the named process; an unnamed one must have started
// before the decision; a command with no time and no names is executed (the old writers').
TEST(CommandStalenessTest, NamedIncarnationOrStartedBeforeTheDecision) {
  proto::Command c;
  c.id = "x";
  c.kind = "stop";
  const uint64_t started = 1'700'000'000'000ull * 1000000;
  EXPECT_EQ(CommandStaleness(c, 3, started), "");
  c.incarnations = {{3, started}};
  EXPECT_EQ(CommandStaleness(c, 3, started), "");
  c.incarnations = {{3, started - 1}};
  EXPECT_NE(CommandStaleness(c, 3, started).find("written for incarnation"), std::string::npos);
  c.incarnations = {{4, started}};
  c.decided_unix_ms = 1'700'000'000'000 - 1;  // rank 3 not named, started after the decision
  EXPECT_NE(CommandStaleness(c, 3, started), "");
  c.decided_unix_ms = 0;
  c.unix_ms = 1'700'000'000'000 + 5;  // the write time stands in for the decision's
  EXPECT_EQ(CommandStaleness(c, 3, started), "");
}

}  // namespace
}  // namespace ft::worker

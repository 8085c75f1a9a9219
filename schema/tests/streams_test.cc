// Each stream's maker and reader meet: what AppendEvent / AppendAck / PostCommand write, through
// the in-memory Redis, reads back as the same record; foreign or contradicting entries come back
// as bad entries with why, and the read goes on.
#include "schema/streams.h"

#include <gtest/gtest.h>

#include "proto/codec.h"
#include "redis/fake/fake_store.h"

namespace ft::schema {
namespace {

class StreamsTest : public ::testing::Test {
 protected:
  StreamsTest() : store_(&server_) { EXPECT_TRUE(store_.Ensure(std::chrono::steady_clock::now())); }

  void Write(const redis::Argv& argv) {
    const redis::Reply r = server_.Execute(argv);
    ASSERT_FALSE(r.is_error()) << r.DebugString();
  }

  redis::FakeRedis server_;
  redis::FakeStore store_;
  proto::Keys keys_{"j"};
};

TEST_F(StreamsTest, AnEventReadsBackAsWrittenAndTheCursorMovesPastIt) {
  proto::Event e;
  e.kind = "exit";
  e.rank = 3;
  e.node = "n1";
  e.unix_ms = 1700000000000;
  e.code = -9;
  Write(AppendEvent(keys_, e));
  e.rank = 2;
  Write(AppendEvent(keys_, e));

  StreamRead<proto::Event> read;
  ASSERT_TRUE(ReadStream(store_, After(keys_.Events(), "", 1), &read).ok());
  ASSERT_EQ(read.entries.size(), 1u);
  EXPECT_EQ(read.entries[0].value.rank, 3);
  EXPECT_EQ(proto::Encode(read.entries[0].value), proto::Encode([&] { proto::Event x = e; x.rank = 3; return x; }()));
  EXPECT_EQ(read.last_id(), read.entries[0].id);

  StreamRead<proto::Event> rest;
  ASSERT_TRUE(ReadStream(store_, After(keys_.Events(), read.last_id(), 10), &rest).ok());
  ASSERT_EQ(rest.entries.size(), 1u) << "the cursor's entry is not read again";
  EXPECT_EQ(rest.entries[0].value.rank, 2);

  StreamRead<proto::Event> both;
  ASSERT_TRUE(ReadStream(store_, Between(keys_.Events(), read.last_id(), rest.last_id(), 10), &both).ok());
  EXPECT_EQ(both.entries.size(), 2u) << "both ends included";

  StreamRead<proto::Event> newest;
  ASSERT_TRUE(ReadStream(store_, Newest(keys_.Events(), 1), &newest).ok());
  ASSERT_EQ(newest.entries.size(), 1u);
  EXPECT_EQ(newest.entries[0].value.rank, 2);
}

TEST_F(StreamsTest, ACommandAndItsAckReadBack) {
  proto::Command c;
  c.id = "inc-1-save-2";
  c.kind = "save";
  c.rank = 2;
  c.text = "inc-1";
  Write(PostCommand(keys_, "n1", c));
  StreamRead<proto::Command> commands;
  ASSERT_TRUE(ReadStream(store_, After(keys_.Commands("n1"), "", 10), &commands).ok());
  ASSERT_EQ(commands.entries.size(), 1u);
  EXPECT_EQ(proto::Encode(commands.entries[0].value), proto::Encode(c));
  StreamRead<proto::Command> other_node;
  ASSERT_TRUE(ReadStream(store_, After(keys_.Commands("n0"), "", 10), &other_node).ok());
  EXPECT_TRUE(other_node.entries.empty());

  proto::CommandAck ack;
  ack.id = c.id;
  ack.node = "n1";
  ack.rank = 2;
  ack.result = "ok";
  Write(AppendAck(keys_, ack));
  StreamRead<proto::CommandAck> acks;
  ASSERT_TRUE(ReadStream(store_, After(keys_.Acks(), "", 10), &acks).ok());
  ASSERT_EQ(acks.entries.size(), 1u);
  EXPECT_EQ(proto::Encode(acks.entries[0].value), proto::Encode(ack));
}

TEST_F(StreamsTest, AnIncidentsFieldsReadBack) {
  proto::Incident inc;
  inc.id = "1700000000000-crash";
  inc.kind = "crash";
  inc.suspects = {proto::Suspect{3, "n1", "gone"}};
  redis::Argv xadd = {"XADD", keys_.Incidents(), "*"};
  const redis::Argv fields = IncidentFields(inc);
  xadd.insert(xadd.end(), fields.begin(), fields.end());
  Write(xadd);
  StreamRead<proto::Incident> read;
  ASSERT_TRUE(ReadStream(store_, After(keys_.Incidents(), "", 10), &read).ok());
  ASSERT_EQ(read.entries.size(), 1u);
  EXPECT_EQ(proto::Encode(read.entries[0].value), proto::Encode(inc));
}

TEST_F(StreamsTest, ForeignEntriesAreReturnedWithWhyAndTheReadGoesOn) {
  proto::Event e;
  e.kind = "exit";
  e.rank = 1;
  e.node = "n0";
  Write({"XADD", keys_.Events(), "*", "kind", "exit", "json", "{not json"});
  Write({"XADD", keys_.Events(), "*", "kind", "exit"});
  Write({"XADD", keys_.Events(), "*", "kind", "timeout", "json", proto::Encode(e)});  // contradicts
  Write(AppendEvent(keys_, e));

  StreamRead<proto::Event> read;
  ASSERT_TRUE(ReadStream(store_, After(keys_.Events(), "", 10), &read).ok());
  ASSERT_EQ(read.entries.size(), 4u) << "in the stream's order, bad ones among them";
  EXPECT_EQ(read.bad(), 3u);
  EXPECT_EQ(read.entries[0].RawJson(), "{not json");
  EXPECT_NE(read.entries[1].why.message().find("has no json field"), std::string::npos) << read.entries[1].why.message();
  EXPECT_NE(read.entries[2].why.message().find("field kind 'timeout' but json kind 'exit'"), std::string::npos)
      << read.entries[2].why.message();
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(read.entries[i].why.message().find(read.entries[i].id), std::string::npos) << "names the entry";
  }
  ASSERT_TRUE(read.entries[3].ok()) << read.entries[3].why.message();
  EXPECT_EQ(read.entries[3].value.rank, 1);
  EXPECT_EQ(read.last_id(), read.entries[3].id);
}

TEST_F(StreamsTest, AReplyThatIsNoStreamIsSaidSo) {
  Write({"SET", keys_.Acks(), "x"});
  StreamRead<proto::CommandAck> read;
  EXPECT_FALSE(ReadStream(store_, After(keys_.Acks(), "", 10), &read).ok()) << "WRONGTYPE is Redis's error";
  EXPECT_TRUE(read.entries.empty());

  StreamRead<proto::CommandAck> scalar;
  DecodeStream(redis::Reply::String("x"), &scalar);
  EXPECT_FALSE(scalar.not_a_stream.empty());
  StreamRead<proto::CommandAck> empty;
  DecodeStream(redis::Reply::Nil(), &empty);
  EXPECT_TRUE(empty.not_a_stream.empty()) << "a stream not there yet is an empty one";

  StreamRead<proto::CommandAck> parsed;
  DecodeStream(redis::Reply::Array({redis::Reply::String("x"), redis::Reply::Nil()}), &parsed);
  EXPECT_EQ(parsed.malformed, 2u);
  EXPECT_TRUE(parsed.entries.empty());
}

// A node's command cursor reads back where it was set, the legacy key is another key; a stream's
// length counts what was appended; the nodes index lists the newest nodes first.
TEST_F(StreamsTest, TheCursorTheLengthAndTheNodesIndexReadBack) {
  EXPECT_TRUE(server_.Execute(GetCommandCursor(keys_, "node0")).is_nil());
  Write(SetCommandCursor(keys_, "node0", "1700000000000-3"));
  EXPECT_EQ(server_.Execute(GetCommandCursor(keys_, "node0")).str(), "1700000000000-3");
  EXPECT_TRUE(server_.Execute(GetCommandCursor(keys_, "node1")).is_nil());
  EXPECT_TRUE(server_.Execute(GetLegacyCommandCursor(keys_, "node0")).is_nil());

  EXPECT_EQ(server_.Execute(Length(keys_.Events())).integer(), 0);
  proto::Event e;
  e.kind = proto::EventKindName(proto::EventKind::kTimeout);
  e.node = "node0";
  e.rank = 1;
  Write(AppendEvent(keys_, e));
  Write(AppendEvent(keys_, e));
  EXPECT_EQ(server_.Execute(Length(keys_.Events())).integer(), 2);

  EXPECT_EQ(server_.Execute(NodeIndexExists()).integer(), 0);
  for (const auto& w : IndexNode("node-a", 1000, 60000)) Write(w);
  for (const auto& w : IndexNode("node-b", 3000, 60000)) Write(w);
  for (const auto& w : IndexNode("node-c", 2000, 60000)) Write(w);
  EXPECT_EQ(server_.Execute(NodeIndexExists()).integer(), 1);
  const redis::Reply two = server_.Execute(NewestIndexedNodes(2));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].str(), "node-b");
  EXPECT_EQ(two[1].str(), "node-c");
  EXPECT_EQ(server_.Execute(NewestIndexedNodes(0)).size(), 3u) << "no count: every node";
}

// A notice reads back through the stream reader as posted (a window's ranks included); an entry
// of an unknown kind comes back with why and the read goes on.
TEST_F(StreamsTest, ANoticeReadsBackAndAnUnknownKindIsSaidSo) {
  proto::Notice window;
  window.kind = proto::NoticeKind::kWindow;
  window.open = true;
  window.window = "1700000000000-0";
  const std::vector<int> ranks = {0, 1, 2, 3, 64};
  window.ranks = proto::RankRanges::Of(ranks);
  Write(PostNotice(keys_, proto::NoticeOf(proto::NoticeKind::kRestore)));
  Write({"XADD", keys_.Notify(), "*", "kind", "reboot"});
  Write(PostNotice(keys_, window));

  StreamRead<proto::Notice> read;
  ASSERT_TRUE(ReadStream(store_, After(keys_.Notify(), "0-0", 10), &read).ok());
  ASSERT_EQ(read.entries.size(), 3u);
  ASSERT_TRUE(read.entries[0].ok());
  EXPECT_EQ(read.entries[0].value, proto::NoticeOf(proto::NoticeKind::kRestore));
  EXPECT_FALSE(read.entries[1].ok());
  EXPECT_NE(read.entries[1].why.message().find("reboot"), std::string::npos) << read.entries[1].why.message();
  ASSERT_TRUE(read.entries[2].ok()) << read.entries[2].why.message();
  EXPECT_EQ(read.entries[2].value, window);
}

}  // namespace
}  // namespace ft::schema

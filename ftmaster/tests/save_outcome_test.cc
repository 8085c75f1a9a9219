#include "ftmaster/save_outcome.h"

#include <gtest/gtest.h>

namespace ft::master {
namespace {

std::vector<SaveTarget> Targets() { return {{0, "n1"}, {2, "n1"}, {4, "n2"}, {6, ""}}; }

TEST(SaveOutcomeTest, NothingSavedSaysSo) {
  SaveOutcome o = CountSaveOutcome(Targets(), {{0, "not_supported"}, {2, "not_supported"}, {4, "failed"}});
  EXPECT_EQ(o.shards, 4);
  EXPECT_EQ(o.saved, 0);
  EXPECT_EQ(o.not_supported, 2);
  EXPECT_EQ(o.failed, 1);
  EXPECT_EQ(o.unreachable, 1);
  EXPECT_EQ(o.unanswered, 0);
  std::string text = DescribeSaveOutcome(o);
  EXPECT_EQ(text.rfind("saved 0 of 4 shards (", 0), 0u) << text;
  EXPECT_NE(text.find("2 answered not_supported"), std::string::npos) << text;
  EXPECT_NE(text.find("1 never asked: no node is known"), std::string::npos) << text;
  EXPECT_NE(text.find("stopped without a checkpoint"), std::string::npos) << text;
  EXPECT_EQ(EncodeSaveOutcome("inc-1", o),
            R"({"v":1,"incident":"inc-1","shards":4,"saved":0,"not_supported":2,"failed":1,"unreachable":1,"unanswered":0})");
}

TEST(SaveOutcomeTest, NoTargetReachableIsNotASave) {
  std::vector<SaveTarget> none_known = {{0, ""}, {1, ""}};
  SaveOutcome o = CountSaveOutcome(none_known, {});
  EXPECT_EQ(o.saved, 0);
  EXPECT_EQ(o.unreachable, 2);
  EXPECT_NE(DescribeSaveOutcome(o).find("without a checkpoint"), std::string::npos);
}

TEST(SaveOutcomeTest, PartialAndCompleteSaves) {
  SaveOutcome partial = CountSaveOutcome(Targets(), {{0, "done"}, {2, "done"}});
  EXPECT_EQ(partial.saved, 2);
  EXPECT_EQ(partial.unanswered, 1);
  EXPECT_NE(DescribeSaveOutcome(partial).find("saved 2 of 4 shards"), std::string::npos);
  EXPECT_NE(DescribeSaveOutcome(partial).find("incomplete"), std::string::npos);
  std::vector<SaveTarget> all = {{0, "n1"}};
  SaveOutcome complete = CountSaveOutcome(all, {{0, "done"}});
  EXPECT_EQ(DescribeSaveOutcome(complete), "saved 1 of 1 shard; the checkpoint is complete");
}

}  // namespace
}  // namespace ft::master

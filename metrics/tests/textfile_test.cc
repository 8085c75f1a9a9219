#include "metrics/textfile.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace ft::metrics {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TextfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ft-textfile-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }
  int Entries() {
    int n = 0;
    DIR* d = opendir(dir_.c_str());
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
    return n;
  }
  std::string dir_;
};

TEST_F(TextfileTest, ReplacesTheFileWithReadableModeAndLeavesNoTemporary) {
  const std::string path = dir_ + "/ft.prom";
  ASSERT_TRUE(WriteTextfile(path, "ft_a 1\n").ok());
  EXPECT_EQ(ReadFile(path), "ft_a 1\n");
  ASSERT_TRUE(WriteTextfile(path, "ft_a 2\n").ok());
  EXPECT_EQ(ReadFile(path), "ft_a 2\n");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(Entries(), 1);
}

// A reader polling the file while it is rewritten sees one whole version or the other, never a
// truncated or mixed one (what an in-place rewrite would show).
TEST_F(TextfileTest, AReaderNeverSeesAPartialFile) {
  const std::string path = dir_ + "/ft.prom";
  const std::string a(64 * 1024, 'a'), b(64 * 1024, 'b');
  ASSERT_TRUE(WriteTextfile(path, a).ok());
  std::atomic<bool> done{false};
  std::atomic<int> bad{0}, reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      const std::string text = ReadFile(path);
      if (text != a && text != b) ++bad;
      ++reads;
    }
  });
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(WriteTextfile(path, i % 2 ? a : b).ok());
  while (reads.load() < 10) std::this_thread::yield();
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(Entries(), 1);
}

TEST_F(TextfileTest, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const std::string path = dir_ + "/ft.prom";
  ASSERT_TRUE(WriteTextfile(path, "old\n").ok());
  // The target is a directory: the rename fails.
  const std::string target_dir = dir_ + "/sub.prom";
  ASSERT_EQ(mkdir(target_dir.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((target_dir + "/x").c_str(), 0755), 0);
  EXPECT_FALSE(WriteTextfile(target_dir, "new\n").ok());
  EXPECT_EQ(ReadFile(path), "old\n");
  EXPECT_EQ(Entries(), 2);  // ft.prom and sub.prom, no temporary
  EXPECT_FALSE(WriteTextfile(dir_ + "/missing/ft.prom", "x").ok());
}

}  // namespace
}  // namespace ft::metrics

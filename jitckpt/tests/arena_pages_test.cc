#include "jitckpt/arena_pages.h"

#include <gtest/gtest.h>

#include <string>

namespace ft::ckpt {
namespace {

// Lines as a Debian host's /proc/self/mountinfo writes them (proc(5)): optional fields
// (shared:N) before the "-", a space in a mount point as \040.
constexpr const char* kMountInfo =
    "22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "28 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,discard,errors=remount-ro\n"
    "25 28 0:23 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,inode64\n"
    "90 28 0:51 / /run/ft-arenas rw,relatime shared:40 - tmpfs tmpfs rw,size=41943040k,huge=within_size,inode64\n"
    "91 28 0:52 / /run/ft\\040advised rw,relatime - tmpfs tmpfs rw,huge=advise\n"
    "92 25 0:53 / /dev/shm/ft-huge rw,relatime - tmpfs tmpfs rw,huge=always\n";

TEST(ArenaPagesTest, DevShmWithoutAHugeOptionGivesFourKibPagesAndSaysWhatToDo) {
  const ArenaPages p = ArenaPagesOf(kMountInfo, "/dev/shm");
  ASSERT_TRUE(p.known);
  EXPECT_FALSE(p.huge);
  EXPECT_EQ(p.mount_point, "/dev/shm");
  EXPECT_EQ(p.fs_type, "tmpfs");
  EXPECT_EQ(p.huge_option, "never");
  const std::string text = ArenaPagesText(p);
  EXPECT_NE(text.find("4 KiB pages (the tmpfs at /dev/shm is mounted huge=never)"), std::string::npos) << text;
  EXPECT_NE(text.find("FT_CKPT_ARENA_DIR"), std::string::npos) << text;
}

TEST(ArenaPagesTest, ATmpfsMountedWithHugePagesGivesThemToItsSubdirectories) {
  const ArenaPages p = ArenaPagesOf(kMountInfo, "/run/ft-arenas/job-7");
  ASSERT_TRUE(p.known);
  EXPECT_TRUE(p.huge);
  EXPECT_EQ(p.mount_point, "/run/ft-arenas");
  EXPECT_EQ(p.huge_option, "within_size");
  EXPECT_EQ(ArenaPagesText(p), "huge pages (tmpfs huge=within_size at /run/ft-arenas)");
  // huge=advise serves too: the arena advises its data regions.
  const ArenaPages advised = ArenaPagesOf(kMountInfo, "/run/ft advised");
  EXPECT_TRUE(advised.huge) << advised.mount_point;
  EXPECT_EQ(advised.mount_point, "/run/ft advised");
}

TEST(ArenaPagesTest, TheDeepestMountHoldingTheDirectoryDecides) {
  EXPECT_TRUE(ArenaPagesOf(kMountInfo, "/dev/shm/ft-huge").huge);
  EXPECT_FALSE(ArenaPagesOf(kMountInfo, "/dev/shm/ft-huge-not").huge) << "a prefix of a name is not a parent";
  const ArenaPages disk = ArenaPagesOf(kMountInfo, "/var/tmp/arenas");
  EXPECT_EQ(disk.mount_point, "/");
  EXPECT_EQ(disk.fs_type, "ext4");
  EXPECT_FALSE(disk.huge);
  EXPECT_NE(ArenaPagesText(disk).find("ext4 at / is not a tmpfs"), std::string::npos);
}

TEST(ArenaPagesTest, ALaterMountOverTheSamePointHidesTheEarlierOne) {
  const std::string text = std::string(kMountInfo) + "93 28 0:54 / /run/ft-arenas rw - tmpfs tmpfs rw\n";
  const ArenaPages p = ArenaPagesOf(text, "/run/ft-arenas");
  EXPECT_FALSE(p.huge);
  EXPECT_EQ(p.huge_option, "never");
}

TEST(ArenaPagesTest, TheKernelsDenyAndForceOverrideEveryTmpfsHugeOption) {
  const ArenaPages denied = ArenaPagesOf(kMountInfo, "/run/ft-arenas", "always within_size advise never [deny] force\n");
  EXPECT_FALSE(denied.huge);
  EXPECT_EQ(denied.huge_option, "never (shmem_enabled deny)");
  const ArenaPages forced = ArenaPagesOf(kMountInfo, "/dev/shm", "always within_size advise never deny [force]\n");
  EXPECT_TRUE(forced.huge);
  EXPECT_EQ(ArenaPagesText(forced), "huge pages (tmpfs huge=always (shmem_enabled force) at /dev/shm)");
  // Not a tmpfs: neither applies. The usual choice leaves each mount's own option.
  EXPECT_FALSE(ArenaPagesOf(kMountInfo, "/var/tmp", "always within_size advise never deny [force]").huge);
  EXPECT_TRUE(ArenaPagesOf(kMountInfo, "/run/ft-arenas", "always within_size advise [never] deny force").huge);
  EXPECT_FALSE(ArenaPagesOf(kMountInfo, "/dev/shm", "] garbled [").huge);
}

TEST(ArenaPagesTest, LinesItCannotReadAreSkipped) {
  const std::string text = std::string("garbage\n\n1 2 3\n94 28 0:55 / /x rw - \n\\\\\\0 - - - - - - -\n") +
                           "95 28 0:56 / /x rw - tmpfs tmpfs rw,huge=always\n" + "96 28 0:57 / /x\\04";
  const ArenaPages p = ArenaPagesOf(text, "/x/y");
  EXPECT_TRUE(p.huge);
  EXPECT_EQ(p.mount_point, "/x");
  EXPECT_FALSE(ArenaPagesOf("", "/x").known);
  EXPECT_NE(ArenaPagesText(ArenaPages{}).find("unknown"), std::string::npos);
}

TEST(ArenaPagesTest, ThisHostsDevShmIsFound) {
  const ArenaPages p = ArenaPagesOfDir("/dev/shm");
  ASSERT_TRUE(p.known);
  EXPECT_EQ(p.fs_type, "tmpfs");
  EXPECT_FALSE(ArenaPagesOfDir("/no/such/dir").known);
}

}  // namespace
}  // namespace ft::ckpt

// Whether the filesystem holding the arenas gives them huge pages, read from the mount table.
//
// Why it matters: every process that maps an arena (the rank saving into it, a restarted rank
// restoring from it, the worker serving it to a peer) pays a page-table entry, a fault and a pin
// per page. On 4 KiB pages that is 262,144 pages per GiB; on a tmpfs mounted with huge pages,
// 512. Measured on the 2-vCPU VM (whose hypervisor charges each first touch of a page in each
// process): a restore of 1 GiB in a new process 2.0 s on /dev/shm, 0.15 s on a tmpfs mounted
// huge=within_size (bench/RESULTS.md). /dev/shm is mounted huge=never on most distributions, so
// the page size is a deployment choice: FT_CKPT_ARENA_DIR on a tmpfs with huge pages.
// The arena advises huge pages on its data regions (MADV_HUGEPAGE), so huge=advise serves too.
#ifndef FT_JITCKPT_ARENA_PAGES_H_
#define FT_JITCKPT_ARENA_PAGES_H_

#include <string>
#include <string_view>

namespace ft::ckpt {

struct ArenaPages {
  bool known = false;       // a mount holding the directory was found
  bool huge = false;        // a tmpfs whose huge= option gives an advised mapping huge pages
  std::string mount_point;  // the mount holding the directory
  std::string fs_type;      // "tmpfs", "ext4", ...
  std::string huge_option;  // the tmpfs's huge= value; "never" when none is given
};

// From the text of /proc/self/mountinfo (proc(5)): the last-mounted entry whose mount point is
// the longest whole-component prefix of `dir` (an absolute path without links). Lines it cannot
// read are skipped. `shmem_enabled`: the text of /sys/kernel/mm/transparent_hugepage/
// shmem_enabled, whose chosen value "deny" takes huge pages from every tmpfs and "force" gives
// them to every tmpfs, whatever its huge= option (the kernel's emergency and test settings).
ArenaPages ArenaPagesOf(std::string_view mountinfo, std::string_view dir, std::string_view shmem_enabled = "");

// The same for a directory on this host (its real path; this process's mount table and
// shmem_enabled).
ArenaPages ArenaPagesOfDir(const std::string& dir);

// For a log line: "huge pages (tmpfs huge=within_size at /run/ft-arenas)", or "4 KiB pages (the
// tmpfs at /dev/shm is mounted huge=never): ..." with what to do about it.
std::string ArenaPagesText(const ArenaPages& pages);

}  // namespace ft::ckpt

#endif  // FT_JITCKPT_ARENA_PAGES_H_

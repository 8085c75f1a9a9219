#include "ftworker/ckpt/arena_sweep.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "ftworker/monitor/process_probe.h"
#include "jitckpt/arena.h"
#include "jitckpt/checksum.h"
#include "jitckpt/tier.h"
#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
#include "schema/master_hash.h"
#include "schema/published.h"
#include "schema/verdict_hash.h"

namespace ft::worker {

namespace {

// A zombie or a missing process holds nothing (the probe rank_monitor asks too); a process
// whose state cannot be read counts as alive.
bool PidLives(int pid) {
  if (pid <= 0) return false;
  ProcessProbe* probe = SystemProcessProbe();
  if (!probe->PidExists(pid)) return false;
  const std::optional<ProcStat> stat = probe->ReadStat(pid);
  return !stat || (stat->state != 'Z' && stat->state != 'X');
}

// (device, inode) -> a process other than this one that maps the file shared and writable.
using MapIndex = std::map<std::pair<uint64_t, uint64_t>, int>;

MapIndex ReadWritableMappings() {
  MapIndex index;
  const int self = getpid();
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return index;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0 || pid == self) continue;
    std::ifstream maps(fmt::format("/proc/{}/maps", pid));  // another user's: unreadable, skipped
    std::string line;
    while (std::getline(maps, line)) {
      // address perms offset dev inode path
      std::istringstream fields(line);
      std::string addr, perms, offset, dev;
      uint64_t ino = 0;
      if (!(fields >> addr >> perms >> offset >> dev >> ino) || ino == 0) continue;
      if (perms.size() < 4 || perms[1] != 'w' || perms[3] != 's') continue;
      unsigned major = 0, minor = 0;
      if (std::sscanf(dev.c_str(), "%x:%x", &major, &minor) != 2) continue;
      index.emplace(std::make_pair(static_cast<uint64_t>(makedev(major, minor)), ino), static_cast<int>(pid));
    }
  }
  closedir(proc);
  return index;
}

// The job's prefetch arenas (ft-prefetch.<job>.<rank>) or buddy copies (ft-replica.<job>.<rank>),
// by `path_for`, sorted by rank.
std::vector<std::string> ListPrefetch(const std::string& dir, const std::string& job,
                                      std::string (*path_for)(std::string_view, std::string_view, int) =
                                          &ckpt::Arena::PrefetchPathFor) {
  const std::string zero = path_for(dir, job, 0);
  const std::string prefix = zero.substr(zero.rfind('/') + 1, zero.size() - zero.rfind('/') - 2);
  std::vector<std::pair<int, std::string>> found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string_view name = e->d_name;
      if (!name.starts_with(prefix)) continue;
      std::string_view digits = name.substr(prefix.size());
      if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0') ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        continue;
      }
      const int rank = std::stoi(std::string(digits));
      found.emplace_back(rank, path_for(dir, job, rank));
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [rank, path] : found) out.push_back(std::move(path));
  return out;
}

int RankOfPath(const std::string& path, bool prefetch) {
  if (!prefetch) return ckpt::Arena::RankOf(path);
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? -1 : std::atoi(path.c_str() + dot + 1);
}

}  // namespace

ArenaHolderFn SystemArenaHolder() {
  auto index = std::make_shared<std::unique_ptr<MapIndex>>();
  return [index](const std::string& path, uint64_t ino, int writer_pid) -> std::string {
    (void)path;
    if (writer_pid == getpid()) return fmt::format("this process (pid {}) wrote it and holds it", writer_pid);
    if (PidLives(writer_pid)) return fmt::format("its writer, pid {}, is alive", writer_pid);
    if (*index == nullptr) *index = std::make_unique<MapIndex>(ReadWritableMappings());
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || st.st_ino != ino) return "";
    auto it = (*index)->find({static_cast<uint64_t>(st.st_dev), ino});
    if (it != (*index)->end() && PidLives(it->second)) {
      return fmt::format("process {} maps it writable", it->second);
    }
    return "";
  };
}

std::vector<ArenaSweepEntry> SweepArenas(const ArenaSweepOptions& options, const JobGcFacts& job) {
  ArenaHolderFn holder = options.holder ? options.holder : SystemArenaHolder();
  std::vector<std::pair<std::string, bool>> paths;
  for (std::string& p : ckpt::Arena::List(options.arena_dir, options.job)) paths.emplace_back(std::move(p), false);
  for (std::string& p : ListPrefetch(options.arena_dir, options.job)) paths.emplace_back(std::move(p), true);
  // Buddy copies this node keeps of another node's ranks (ftworker/prefetch/replicator.h): by the same
  // rule; the worker holding them (their writer) keeps them while it runs.
  const size_t first_replica = paths.size();
  for (std::string& p : ListPrefetch(options.arena_dir, options.job, &ckpt::Arena::ReplicaPathFor)) {
    paths.emplace_back(std::move(p), true);
  }

  std::vector<ArenaSweepEntry> out;
  for (size_t index = 0; index < paths.size(); ++index) {
    const auto& [path, prefetch] = paths[index];
    const int rank = RankOfPath(path, prefetch);
    if (!options.ranks.empty() &&
        std::find(options.ranks.begin(), options.ranks.end(), rank) == options.ranks.end()) {
      continue;
    }
    struct stat before;
    if (lstat(path.c_str(), &before) != 0) continue;  // gone meanwhile
    ArenaSweepEntry entry;
    ArenaFacts& f = entry.facts;
    f.path = path;
    f.prefetch = prefetch && index < first_replica;
    f.replica = index >= first_replica;
    f.rank = rank;
    entry.bytes = static_cast<uint64_t>(before.st_size);
    ckpt::Arena arena;
    Status s;
    if (!S_ISREG(before.st_mode) || before.st_uid != geteuid()) {
      s = Status::Corrupt(S_ISREG(before.st_mode) ? fmt::format("owned by uid {}", before.st_uid)
                                                  : std::string("not a regular file"));
    } else {
      s = ckpt::Arena::OpenForRead(path, &arena);
    }
    ckpt::Manifest m;
    uint64_t generation = 0;
    if (s.ok()) {
      s = arena.ReadCommitted(&m, &generation);
      if (s.code() == StatusCode::kNotFound) {
        f.has_copy = false;
        s = Status::Ok();
      } else if (s.ok()) {
        f.has_copy = true;
      }
    }
    if (!s.ok()) {
      f.trusted = false;
      f.untrusted_why = std::string(s.message());
    } else if (f.has_copy) {
      f.step = m.step;
      f.torn = m.torn;
      if (m.job != options.job || m.rank != rank) {
        f.other_job = true;
        f.copy_job = fmt::format("{}' rank '{}", m.job, m.rank);
      } else if (!m.torn) {
        const uint64_t digest = ckpt::ContentDigest(m);
        for (auto [kind, dir] : {std::pair{ckpt::TierKind::kLocal, &options.local_dir},
                                 std::pair{ckpt::TierKind::kRemote, &options.remote_dir}}) {
          if (dir->empty()) continue;
          ckpt::Manifest held;
          if (ckpt::ReadManifest(*dir, options.job, ckpt::CopyId{m.step, m.rank}, &held).ok() &&
              !held.torn && ckpt::ContentDigest(held) == digest) {
            f.persisted_in.push_back(ckpt::TierName(kind));
          }
        }
      }
    }
    entry.decision = DecideArenaGc(f, job);
    // Who holds it is asked only of an arena that would go (it reads /proc): a live holder
    // then keeps it, whatever else holds.
    if (entry.decision.remove) {
      f.held_by = holder(path, before.st_ino, arena.writer_pid());
      if (!f.held_by.empty()) entry.decision = DecideArenaGc(f, job);
    }
    if (entry.decision.remove && !options.dry_run) {
      // The same regular file of this user as read, no holder since, and only then unlink.
      struct stat now;
      if (lstat(path.c_str(), &now) != 0 || now.st_ino != before.st_ino || now.st_dev != before.st_dev ||
          !S_ISREG(now.st_mode) || now.st_uid != geteuid()) {
        entry.remove_error = "the file changed while it was being looked at; left for the next pass";
      } else if (std::string h = holder(path, before.st_ino, arena.writer_pid()); !h.empty()) {
        f.held_by = h;
        entry.decision = DecideArenaGc(f, job);
      } else {
        // Moved aside first: a rank (re)opening its arena from now on finds no file and makes
        // a new one, so none can open it between the last look at its holders and the unlink;
        // one that opened it just before shows in the header's writer, asked once more.
        const std::string aside = fmt::format("{}.tmp.gc.{}", path, getpid());
        if (rename(path.c_str(), aside.c_str()) != 0) {
          entry.remove_error = fmt::format("rename: {}", std::strerror(errno));
        } else if (std::string late = holder(aside, before.st_ino, arena.writer_pid()); !late.empty()) {
          // Back under its name, unless a new arena took the name meanwhile (that one is the
          // rank's now; the old file stays aside until the rank's next arena creation sweeps
          // temp files).
          if (renameat2(AT_FDCWD, aside.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
            entry.remove_error = fmt::format("putting it back from {}: {}", aside, std::strerror(errno));
          }
          f.held_by = late;
          entry.decision = DecideArenaGc(f, job);
        } else if (unlink(aside.c_str()) != 0) {
          entry.remove_error = fmt::format("unlink {}: {}", aside, std::strerror(errno));
        } else {
          entry.removed = true;
        }
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::string ArenaSweepLine(const ArenaSweepEntry& entry) {
  if (!entry.remove_error.empty()) {
    return fmt::format("kept {}: removing it failed: {}", entry.facts.path, entry.remove_error);
  }
  return ArenaGcLine(entry.facts, entry.decision);
}

std::string ArenaSweepSummary(const ArenaSweepOptions& options, const std::vector<ArenaSweepEntry>& entries) {
  int removed = 0, kept = 0;
  uint64_t bytes = 0;
  for (const ArenaSweepEntry& e : entries) {
    const bool goes = options.dry_run ? e.decision.remove && e.remove_error.empty() : e.removed;
    if (goes) {
      ++removed;
      bytes += e.bytes;
    } else {
      ++kept;
    }
  }
  return fmt::format("gc of job {} in {}: {} {} arena{} ({:.1f} MiB), kept {}", options.job,
                     options.arena_dir, options.dry_run ? "would remove" : "removed", removed,
                     removed == 1 ? "" : "s", static_cast<double>(bytes) / (1 << 20), kept);
}

Status ReadJobGcFacts(redis::Commands& db, const proto::Keys& keys, JobGcFacts* out) {
  JobGcFacts facts;
  facts.known = true;
  redis::Reply state, plan, verdicts;
  if (Status s = db.Run(schema::master_hash::Get(keys, schema::master_hash::kJobState), &state); !s.ok()) return s;
  // Absent or unknown is not finished: the arenas a finished job would let go are kept.
  facts.finished = state.is_string() && proto::ParseJobState(state.str()) == proto::JobState::kFinished;
  if (Status s = db.Run(schema::GetPlan(keys), &plan); !s.ok()) return s;
  if (plan.is_string()) {
    proto::RestorePlan decoded;
    if (Status s = proto::Decode(plan.str(), &decoded); !s.ok()) {
      return Status::Corrupt(fmt::format("{}: {}", keys.Restore(), s.message()));
    }
    facts.planned_step = decoded.step;
  }
  if (Status s = db.Run(schema::GetVerdicts(keys), &verdicts); !s.ok()) return s;
  std::vector<schema::HashValue<proto::StepVerdict>> judged;
  (void)schema::DecodeVerdicts(verdicts, &judged);  // a reply that is no hash judges nothing
  for (const auto& [field, v, why, raw] : judged) {
    if (!why.ok()) continue;
    if (v.state == proto::VerdictState::kVerified) facts.newest_verified = std::max(facts.newest_verified, v.step);
    if (v.state != proto::VerdictState::kIncomplete) facts.newest_complete = std::max(facts.newest_complete, v.step);
  }
  *out = std::move(facts);
  return Status::Ok();
}

}  // namespace ft::worker

// The restore plan file (format in node_plan.h and docs/checkpoints.md, "Restore plan file").
// The parser is strict on purpose: the file decides which bytes a rank loads into its model,
// so anything it does not fully understand is an error naming the line, never a guess.
#include "jitckpt/node_plan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <optional>
#include <set>

#include "jitckpt/checksum.h"
#include "jitckpt/file_ops.h"
#include "jitckpt/safe_name.h"

namespace ft::ckpt {
namespace {

constexpr std::string_view kHeaderKey = "ft-restore-plan";
constexpr size_t kMaxPlanBytes = 64ull << 20;  // ~100 bytes a rank: room for 500k ranks
constexpr size_t kMaxNameBytes = 255;
constexpr size_t kMaxSettlingBytes = 1024;

Status LineError(size_t line, std::string_view why) {
  return Status::Corrupt(fmt::format("restore plan line {}: {}", line, why));
}

// A decimal integer in [min, max]: digits only (a '-' only when min < 0), no leading zeros,
// no spaces, nothing after.
bool ParseInteger(std::string_view text, int64_t min, int64_t max, int64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  std::string_view digits = text.front() == '-' ? text.substr(1) : text;
  if (digits.empty() || (digits.size() > 1 && digits.front() == '0') || digits.front() == '+') return false;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) return false;
  *out = value;
  return true;
}

bool IsNodeName(std::string_view node) {
  return !node.empty() && node.size() <= kMaxNameBytes && node != "." && node != ".." &&
         std::all_of(node.begin(), node.end(), IsNodeNameChar);
}

// "prefetched": the copy ftworker pulled from another node into this node's prefetch arena
// (Arena::PrefetchPathFor); only the worker of the node adds it, never the master.
// "replica": a buddy copy the worker of the source's node holds of that rank
// (Arena::ReplicaPathFor; ftworker/prefetch/replicator.h).
bool IsTier(std::string_view tier) {
  return tier == "arena" || tier == "local" || tier == "remote" || tier == "prefetched" || tier == "replica";
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return parts;
}

Status ParseSource(size_t line, std::string_view text, PlanSource* out) {
  std::vector<std::string_view> parts = Split(text, ':');
  if (parts.size() != 3) return LineError(line, fmt::format("source '{}' is not <rank>:<node>:<tiers>", text));
  int64_t rank = 0;
  if (!ParseInteger(parts[0], 0, INT32_MAX, &rank)) {
    return LineError(line, fmt::format("source '{}': bad rank '{}'", text, parts[0]));
  }
  if (!IsNodeName(parts[1])) return LineError(line, fmt::format("source '{}': bad node name '{}'", text, parts[1]));
  PlanSource source;
  source.rank = static_cast<int>(rank);
  source.node = std::string(parts[1]);
  for (std::string_view tier : Split(parts[2], ',')) {
    if (!IsTier(tier)) {
      return LineError(line, fmt::format("source '{}': unknown tier '{}' (arena, local, remote, replica or prefetched)", text, tier));
    }
    if (std::find(source.tiers.begin(), source.tiers.end(), tier) != source.tiers.end()) {
      return LineError(line, fmt::format("source '{}': tier '{}' twice", text, tier));
    }
    source.tiers.emplace_back(tier);
  }
  *out = std::move(source);
  return Status::Ok();
}

Status ParseRankLine(size_t line, std::string_view value, PlanRank* out) {
  std::vector<std::string_view> tokens = Split(value, ' ');
  if (tokens.size() < 2) return LineError(line, "rank line is not 'rank <rank> <digest> <source>...'");
  PlanRank rank;
  int64_t number = 0;
  if (!ParseInteger(tokens[0], 0, INT32_MAX, &number)) return LineError(line, fmt::format("bad rank '{}'", tokens[0]));
  rank.rank = static_cast<int>(number);
  if (!ParseDigest(tokens[1], &rank.digest)) {
    return LineError(line, fmt::format("bad digest '{}' (16 lowercase hex digits)", tokens[1]));
  }
  // A source is a (rank, node) pair: the rank's own copy on the node it ran on and the copy
  // prefetched onto the node it runs on now are two sources of one rank.
  std::set<std::pair<int, std::string>> sources;
  for (size_t i = 2; i < tokens.size(); ++i) {
    PlanSource source;
    FT_RETURN_IF_ERROR(ParseSource(line, tokens[i], &source));
    if (!sources.insert({source.rank, source.node}).second) {
      return LineError(line, fmt::format("source rank {} on node {} listed twice", source.rank, source.node));
    }
    rank.sources.push_back(std::move(source));
  }
  *out = std::move(rank);
  return Status::Ok();
}

Status ParsePath(size_t line, std::string_view key, std::string_view value, std::string* out) {
  if (value.empty() || value.front() != '/') {
    return LineError(line, fmt::format("{} '{}' is not an absolute path", key, value));
  }
  *out = std::string(value);
  return Status::Ok();
}

}  // namespace

const PlanRank* NodePlan::Find(int rank) const {
  auto it = std::find_if(ranks.begin(), ranks.end(), [rank](const PlanRank& r) { return r.rank == rank; });
  return it == ranks.end() ? nullptr : &*it;
}

std::string NodePlanPath(std::string_view arena_dir, std::string_view job, std::string_view node) {
  return JoinPath(arena_dir, fmt::format("ft-plan.{}.{}", SafeJobName(job), SafeNodeName(node)));
}

std::string EncodeNodePlan(const NodePlan& plan) {
  // A final plan stays format 1: ranks still running an older libft.so read it.
  const uint32_t format = plan.settling.empty() ? 1 : kNodePlanVersion;
  std::string out = fmt::format("{} {}\njob {}\nnode {}\nversion {}\n", kHeaderKey, format, plan.job,
                                plan.node, plan.version);
  out += plan.step >= 0 ? fmt::format("step {}\n", plan.step) : "step none\n";
  if (!plan.settling.empty()) {
    std::string why = plan.settling.substr(0, kMaxSettlingBytes);
    for (char& c : why) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';  // one line, as the reader wants
    }
    out += fmt::format("settling {}\n", why);
  }
  out += fmt::format("arena_dir {}\n", plan.arena_dir);
  if (!plan.local_dir.empty()) out += fmt::format("local_dir {}\n", plan.local_dir);
  if (!plan.remote_dir.empty()) out += fmt::format("remote_dir {}\n", plan.remote_dir);
  std::vector<const PlanRank*> ranks;
  for (const PlanRank& r : plan.ranks) ranks.push_back(&r);
  std::stable_sort(ranks.begin(), ranks.end(), [](const PlanRank* a, const PlanRank* b) { return a->rank < b->rank; });
  for (const PlanRank* r : ranks) {
    out += fmt::format("rank {} {}", r->rank, DigestHex(r->digest));
    for (const PlanSource& s : r->sources) {
      out += fmt::format(" {}:{}:", s.rank, s.node);
      for (size_t i = 0; i < s.tiers.size(); ++i) out += (i ? "," : "") + s.tiers[i];
    }
    out += '\n';
  }
  out += "end\n";
  return out;
}

Status ParseNodePlan(std::string_view text, NodePlan* out) {
  if (text.size() > kMaxPlanBytes) {
    return Status::Corrupt(fmt::format("restore plan of {} bytes (at most {})", text.size(), kMaxPlanBytes));
  }
  NodePlan plan;
  std::set<std::string_view> seen_keys;
  std::set<int> seen_ranks;
  bool ended = false;
  size_t line_number = 0;
  int64_t format = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t newline = text.find('\n', at);
    if (newline == std::string_view::npos) newline = text.size();  // a last line without '\n'
    std::string_view line = text.substr(at, newline - at);
    at = newline + 1;
    ++line_number;
    if (ended) return LineError(line_number, "text after 'end'");
    for (char c : line) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return LineError(line_number, fmt::format("control character {:#04x}", static_cast<unsigned char>(c)));
      }
    }
    size_t space = line.find(' ');
    std::string_view key = line.substr(0, space);
    std::string_view value = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    bool has_value = space != std::string_view::npos;

    if (line_number == 1) {
      if (key != kHeaderKey || !ParseInteger(value, 1, INT32_MAX, &format)) {
        return LineError(1, fmt::format("not a restore plan (expected '{} {}')", kHeaderKey, kNodePlanVersion));
      }
      if (format > kNodePlanVersion) {
        return Status::Unsupported(fmt::format("restore plan format {} is newer than this build's {}; upgrade ft",
                                               format, kNodePlanVersion));
      }
      continue;
    }
    if (key == "end") {
      if (has_value) return LineError(line_number, "'end' takes no value");
      ended = true;
      continue;
    }
    if (key == "rank") {
      PlanRank rank;
      FT_RETURN_IF_ERROR(ParseRankLine(line_number, value, &rank));
      if (!seen_ranks.insert(rank.rank).second) return LineError(line_number, fmt::format("rank {} twice", rank.rank));
      plan.ranks.push_back(std::move(rank));
      continue;
    }
    static const std::set<std::string_view> kScalarKeys = {"job",       "node",      "version",    "step",
                                                           "arena_dir", "local_dir", "remote_dir", "settling"};
    if (!kScalarKeys.contains(key) || (key == "settling" && format < 2)) {
      return LineError(line_number, fmt::format("unknown key '{}'{}", key.substr(0, 64),
                                                key == "settling" ? " (format 2 has it, this file says 1)" : ""));
    }
    if (!seen_keys.insert(*kScalarKeys.find(key)).second) {
      return LineError(line_number, fmt::format("'{}' twice", key));
    }
    if (value.empty()) return LineError(line_number, fmt::format("'{}' without a value", key));
    if (key == "job") {
      if (value.size() > kMaxNameBytes) return LineError(line_number, "job name too long");
      plan.job = std::string(value);
    } else if (key == "node") {
      if (!IsNodeName(value)) return LineError(line_number, fmt::format("bad node name '{}'", value.substr(0, 64)));
      plan.node = std::string(value);
    } else if (key == "version") {
      if (!ParseInteger(value, 0, INT64_MAX, &plan.version)) {
        return LineError(line_number, fmt::format("bad version '{}'", value.substr(0, 64)));
      }
    } else if (key == "step") {
      if (value == "none") {
        plan.step = -1;
      } else if (!ParseInteger(value, 0, INT64_MAX, &plan.step)) {
        return LineError(line_number, fmt::format("bad step '{}' (a number or 'none')", value.substr(0, 64)));
      }
    } else if (key == "settling") {
      if (value.size() > kMaxSettlingBytes) return LineError(line_number, "settling reason too long");
      plan.settling = std::string(value);
    } else if (key == "arena_dir") {
      FT_RETURN_IF_ERROR(ParsePath(line_number, key, value, &plan.arena_dir));
    } else if (key == "local_dir") {
      FT_RETURN_IF_ERROR(ParsePath(line_number, key, value, &plan.local_dir));
    } else {
      FT_RETURN_IF_ERROR(ParsePath(line_number, key, value, &plan.remote_dir));
    }
  }
  if (line_number == 0) return Status::Corrupt("restore plan is empty");
  if (!ended) return Status::Corrupt(fmt::format("restore plan truncated: no 'end' after line {}", line_number));
  for (std::string_view required : {"job", "node", "version", "step", "arena_dir"}) {
    if (!seen_keys.contains(required)) return Status::Corrupt(fmt::format("restore plan lacks '{}'", required));
  }
  std::sort(plan.ranks.begin(), plan.ranks.end(), [](const PlanRank& a, const PlanRank& b) { return a.rank < b.rank; });
  *out = std::move(plan);
  return Status::Ok();
}

Status WriteNodePlan(const std::string& path, const NodePlan& plan) {
  // Never publish a file the readers would refuse.
  std::string text = EncodeNodePlan(plan);
  NodePlan check;
  Status valid = ParseNodePlan(text, &check);
  if (!valid.ok()) return Status::InvalidArgument(fmt::format("restore plan for {}: {}", path, valid.message()));

  static std::atomic<uint64_t> counter{0};
  const std::string temp = fmt::format("{}.tmp.{}.{}", path, getpid(), counter.fetch_add(1));
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("creating {}", temp));
  auto fail = [&](const Status& s) {
    if (fd >= 0) close(fd);
    unlink(temp.c_str());
    return s;
  };
  if (fchmod(fd, 0600) != 0) return fail(Status::FromErrno(errno, fmt::format("chmod {}", temp)));
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Status::FromErrno(errno, fmt::format("writing {}", temp)));
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail(Status::FromErrno(errno, fmt::format("fsync {}", temp)));
  int closing = fd;
  fd = -1;
  if (close(closing) != 0) return fail(Status::FromErrno(errno, fmt::format("closing {}", temp)));
  if (rename(temp.c_str(), path.c_str()) != 0) {
    return fail(Status::FromErrno(errno, fmt::format("renaming {} to {}", temp, path)));
  }
  return Status::Ok();
}

Status ReadNodePlan(const std::string& path, NodePlan* out) {
  // OpenTrusted: a FIFO planted at the path is refused at once (a plain open would wait for a
  // writer, far past FT_RESTORE_WAIT), and so is a symlink or another user's file.
  int fd = -1;
  Status opened = OpenTrusted(path, O_RDONLY, "restore plan", &fd);
  FT_RETURN_IF_ERROR(opened);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    Status s = Status::FromErrno(errno, fmt::format("fstat {}", path));
    close(fd);
    return s;
  }
  auto refuse = [&](std::string why) {
    close(fd);
    return Status::Corrupt(fmt::format("restore plan {}: {}", path, why));
  };
  if (static_cast<uint64_t>(st.st_size) > kMaxPlanBytes) {
    return refuse(fmt::format("{} bytes (at most {})", st.st_size, kMaxPlanBytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::FromErrno(errno, fmt::format("reading restore plan {}", path));
      close(fd);
      return s;
    }
    if (n == 0) break;  // shrank meanwhile: the parser will find it truncated
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  Status s = ParseNodePlan(text, out);
  return s.ok() ? s : s.WithContext(path);
}

}  // namespace ft::ckpt

namespace ft::ckpt {
namespace {

struct flock WholeFile(short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = 0;
  l.l_len = 0;
  return l;
}

// Whether some open file description holds a write lock on the file at `fd`.
bool LockedByAnyone(int fd) {
  struct flock l = WholeFile(F_RDLCK);
  if (::fcntl(fd, F_OFD_GETLK, &l) != 0) return true;  // cannot tell: trusted, as before the lock
  return l.l_type != F_UNLCK;
}

}  // namespace

std::string NodePlanLockPath(const std::string& plan_path) {
  const size_t slash = plan_path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : plan_path.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? plan_path : plan_path.substr(slash + 1);
  if (name.rfind("ft-plan.", 0) == 0) name = "ft-planlock." + name.substr(8);
  else name += ".lock";
  return dir + name;
}

PlanWriterLock::~PlanWriterLock() {
  if (fd_ >= 0) ::close(fd_);
}

Status PlanWriterLock::Claim(const std::string& plan_path, bool remove_plan) {
  if (fd_ >= 0) return Status::Ok();
  lock_path_ = NodePlanLockPath(plan_path);
  const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Status::IoError(fmt::format("opening the plan lock {}: {}", lock_path_, std::strerror(errno)));
  }
  if (LockedByAnyone(fd)) {
    ::close(fd);
    return Status::Unavailable(fmt::format("{} is held by another live worker of this node and job", lock_path_));
  }
  // The plan file first: once the lock is ours, what is there must be ours too.
  if (remove_plan && ::unlink(plan_path.c_str()) != 0 && errno != ENOENT) {
    const int e = errno;
    ::close(fd);
    return Status::IoError(fmt::format("removing the plan file {} a previous worker left: {}", plan_path,
                                       std::strerror(e)));
  }
  struct flock l = WholeFile(F_WRLCK);
  if (::fcntl(fd, F_OFD_SETLK, &l) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::IoError(fmt::format("locking {}: {}", lock_path_, std::strerror(e)));
  }
  fd_ = fd;
  return Status::Ok();
}

void PlanWriterLock::Release() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

namespace {

// Whether a worker holds the lock file `lock` now; nullopt where there is no lock file.
std::optional<bool> LockHeld(const std::string& lock) {
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  const bool held = LockedByAnyone(fd);
  ::close(fd);
  return held;
}

}  // namespace

Status ReadLiveNodePlan(const std::string& path, NodePlan* out) {
  const std::string lock = NodePlanLockPath(path);
  // A lock file nobody holds: its worker died. No lock file (a worker from before the lock) is trusted.
  if (LockHeld(lock) == false) {
    return Status::NotFound(fmt::format("the worker that wrote {} is gone (nothing holds {}): its plan is not "
                                        "current; waiting for the next worker's", path, lock));
  }
  return ReadNodePlan(path, out);
}

bool NodePlanWriterRuns(const std::string& path) { return LockHeld(NodePlanLockPath(path)).value_or(false); }

}  // namespace ft::ckpt

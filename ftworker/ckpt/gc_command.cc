#include "ftworker/ckpt/gc_command.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "proto/keys.h"
#include "redis/client.h"
#include "redis/cluster.h"

namespace ft::worker {

int RunGc(const GcCommand& c) {
  const ArenaSweepOptions& options = c.sweep;
  if (options.job.empty()) {
    std::fprintf(stderr, "ftworker gc: no job: pass --job J (or set FT_JOB)\n");
    return 2;
  }
  JobGcFacts job;
  if (!c.have_redis) {
    job.unknown_why = c.no_redis_why;
  } else {
    std::unique_ptr<redis::Commands> db;
    Status s = redis::OpenCommands(c.redis, std::chrono::seconds(3), std::chrono::seconds(3), &db);
    if (s.ok()) s = ReadJobGcFacts(*db, proto::Keys(options.job), &job);
    job.release = c.release;
    if (!s.ok()) {
      job = JobGcFacts{};
      job.unknown_why = fmt::format("Redis at {}: {}", redis::Redacted(c.redis), s.message());
    }
  }
  std::vector<ArenaSweepEntry> entries = SweepArenas(options, job);
  for (const ArenaSweepEntry& e : entries) {
    std::string line = ArenaSweepLine(e);
    // A dry run removes nothing: say what it would do.
    if (options.dry_run && e.decision.remove && line.starts_with("removed ")) line = "would remove " + line.substr(8);
    std::printf("%s\n", line.c_str());
  }
  std::printf("%s\n", ArenaSweepSummary(options, entries).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace ft::worker

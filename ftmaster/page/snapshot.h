// ft::master::page::Snapshot: what the live page shows, as plain data — one read of the job's
// Redis by the PageReader (reader.h), rendered by the pure functions of render.h. A value that did
// not decode is kept as its raw bytes (Garbled) so the page shows it as such, not as nothing.
// Owned by whoever read it; immutable once published (the reader shares it read-only).
#ifndef FT_FTMASTER_PAGE_SNAPSHOT_H_
#define FT_FTMASTER_PAGE_SNAPSHOT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/ckpt_codec.h"
#include "proto/master_codec.h"
#include "proto/messages.h"
#include "proto/node_history.h"

namespace ft::master::page {

// A value as read that did not decode: where it was and its first bytes.
struct Garbled {
  std::string where;  // "incident 1700000000000-0", "master goodput"
  std::string raw;    // at most kGarbledBytes of it
  std::string why;
};
inline constexpr size_t kGarbledBytes = 200;

// One rank as the page shows it: membership, with the live state and the step from its worker.
struct RankRow {
  int rank = -1;
  std::string node;
  std::string state;     // progress state if reported, else the membership's; "" unknown
  int64_t step = -1;     // the job's own step (ft_step_done) if declared, else the steps ft counted
  double step_ms = 0;    // median step time over the summary's window (0: none)
  bool reported = false; // a progress report exists
};

struct IncidentRow {
  std::string stream_id;
  proto::Incident incident;
};

struct CheckpointRow {
  int64_t step = -1;
  std::optional<proto::StepVerdict> verdict;  // nullopt: not judged yet (or garbled: see garbled)
};

// A node of the job with its history across jobs (ft:node:{<node>}:history, newest first).
struct NodeHistoryRow {
  std::string node;
  std::vector<proto::NodeRecord> records;  // at most kNodeRecordsShown
  int64_t total = 0;                       // XLEN
};

struct Snapshot {
  std::string job;
  int64_t taken_unix_ms = 0;
  bool redis_up = false;
  std::string redis_error;  // when !redis_up: why (never a URL or password)

  // Job.
  std::string job_state;    // JobStateName, "unknown" when absent, "garbled" (see garbled)
  std::string leader;       // the lease's value, "" none
  bool open_incident = false;
  int64_t evicted_nodes = 0;

  // Ranks, by rank, as read at ranks_read_unix_ms (a large job's are read less often).
  std::vector<RankRow> ranks;
  int64_t ranks_read_unix_ms = 0;

  // The incident stream: the newest kIncidentsShown, oldest first; total counts all.
  std::vector<IncidentRow> incidents;
  int64_t incidents_total = 0;

  // Checkpoints, newest first, and the restore plan.
  std::vector<CheckpointRow> checkpoints;
  std::optional<proto::RestorePlan> plan;

  std::optional<proto::Goodput> goodput;

  // Node history: keys_present false when neither ft:nodes nor ft:cordon exists.
  bool node_keys_present = false;
  std::vector<proto::CordonEntry> cordons;
  std::vector<NodeHistoryRow> node_history;

  std::vector<Garbled> garbled;
};

inline constexpr size_t kIncidentsShown = 50;
inline constexpr size_t kCheckpointsShown = 20;
inline constexpr size_t kNodeHistoryNodes = 32;
inline constexpr size_t kNodeRecordsShown = 5;

}  // namespace ft::master::page

#endif  // FT_FTMASTER_PAGE_SNAPSHOT_H_

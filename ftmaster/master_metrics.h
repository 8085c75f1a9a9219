// ft::master::MasterMetrics: ftmaster's Prometheus figures (README "Metrics"). Everything the
// master knows is in Redis, so the figures are read from there — the incident stream, the
// checkpoint verdicts, the leader lease, the job state, the timeouts' version, the goodput
// ledger — on a thread of its own with its own connection, every FT_METRICS_INTERVAL: the loop
// is never held, and a standby master shows the same job figures as the leader
// (ft_master_leader tells them apart).
// Counters count what the job's Redis holds (the incident stream from its start), so a
// restarted master's counters continue where the job stands.
#ifndef FT_FTMASTER_MASTER_METRICS_H_
#define FT_FTMASTER_MASTER_METRICS_H_

#include <map>
#include <optional>
#include <string>

#include "common/units.h"
#include "ftmaster/redis_poller.h"
#include "ftmaster/store.h"
#include "metrics/registry.h"
#include "proto/keys.h"
#include "redis/store.h"
#include "redis/url.h"

namespace ft::master {

struct MasterMetricsOptions {
  std::string job;
  std::string node;       // this master's host, the `node` label of its own figures
  std::string master_id;  // the lease value (MasterLoop::id()): leader or not
  redis::Endpoint endpoint;
  Duration interval = std::chrono::seconds(1);
};

class MasterMetrics {
 public:
  // Declares the families in `registry` (which must outlive this).
  MasterMetrics(MasterMetricsOptions options, metrics::Registry* registry);
  ~MasterMetrics();  // Stop()
  MasterMetrics(const MasterMetrics&) = delete;
  MasterMetrics& operator=(const MasterMetrics&) = delete;

  // The reading thread (a RedisPoller); Stop() joins it. Idempotent.
  void Start() { poller_.Start(); }
  void Stop() { poller_.Stop(); }

  // One round over `redis` (tests: a FakeStore); `rtt_s` the round trip of its PING (<0:
  // unknown). False when Redis failed (the figures read before stay).
  bool Round(redis::Commands& redis, double rtt_s);

 private:
  // A poller's round: a PING, then Round; ft_master_redis_up says whether both worked.
  void Poll(redis::Commands* redis);
  bool ReadIncidents(redis::Commands& redis);
  bool ReadVerdicts(redis::Commands& redis);
  // The ledger the leading master keeps (`goodput` in the master hash): ETTR and seconds by cause.
  void SetGoodput(const std::string& raw);

  const MasterMetricsOptions options_;
  const proto::Keys keys_;
  metrics::Registry* registry_;
  BadValues bad_;
  std::string incident_cursor_;               // the last incident read ("" before the first)
  std::map<int64_t, std::string> verdicts_;   // step -> state, as last counted
  std::optional<proto::JobState> job_state_;  // the state whose gauge is 1
  RedisPoller poller_;                        // last: stopped before the fields it reads go
};

}  // namespace ft::master

#endif  // FT_FTMASTER_MASTER_METRICS_H_

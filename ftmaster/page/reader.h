// ft::master::page::PageReader: the live page's data (README "The live page"). Like MasterMetrics it
// reads the job's Redis through a RedisPoller (ftmaster/redis_poller.h: a thread and a connection
// of its own), every `interval` (~1 s): the loop is never held, and a standby master's page shows
// the same job as the leader's. Each snapshot is rendered once (render.h) on that thread; the
// server's thread only copies the strings of the newest one (Routes()). Nothing secret is read: not the transfer secret, not the
// Redis URL or password.
#ifndef FT_FTMASTER_PAGE_READER_H_
#define FT_FTMASTER_PAGE_READER_H_

#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "common/units.h"
#include "ftmaster/page/snapshot.h"
#include "ftmaster/redis_poller.h"
#include "ftmaster/store.h"
#include "metrics/server.h"
#include "proto/keys.h"
#include "redis/store.h"
#include "redis/url.h"

namespace ft::master::page {

struct PageReaderOptions {
  std::string job;
  redis::Endpoint endpoint;
  Duration interval = std::chrono::seconds(1);
};

// The rank hashes as last decoded, kept from one read to the next: a value whose bytes did not
// change is not decoded again (DecodedHash), so a large job's read costs little more than the
// transfer. One reader's (not thread-safe).
// A read that took T is followed by the next one no sooner than (kRankReadShare - 1) x T later.
struct RankHashes {
  static constexpr int64_t kRankReadShare = 10;
  DecodedHash<proto::Membership> ranks{"ranks"};
  DecodedHash<proto::RankProgress> progress{"progress"};
  DecodedHash<proto::RankSummary> summaries{"summary"};
  size_t undecoded = 0;            // fields of the last read that did not decode
  int64_t read_unix_ms = 0;        // when last read
  int64_t next_read_unix_ms = 0;   // not read again before
};

// One read of the job (tests: on a FakeStore). Never fails: what Redis did not answer is absent
// and s->redis_up / redis_error say so; garbled values land in s->garbled.
void ReadSnapshot(redis::Commands& redis, const std::string& job, int64_t now_unix_ms, BadValues* bad,
                  RankHashes* hashes, Snapshot* s);

class PageReader {
 public:
  explicit PageReader(PageReaderOptions options);
  ~PageReader();  // Stop()
  PageReader(const PageReader&) = delete;
  PageReader& operator=(const PageReader&) = delete;

  // The reading thread (a RedisPoller); Stop() joins it. Idempotent.
  void Start() { poller_.Start(); }
  void Stop() { poller_.Stop(); }

  // "/" and "/api/<panel>.json", each serving the newest rendering (any thread).
  std::map<std::string, metrics::Route> Routes();

  // Renders `s` and makes it the one served (the reading thread; tests).
  void Publish(const Snapshot& s);

 private:
  struct Rendered {
    std::string html;
    std::map<std::string, std::string> json;  // panel name -> body
  };
  // A poller's round: one snapshot read (or Redis unreachable, said so) and published.
  void Poll(redis::Commands* redis);
  std::shared_ptr<const Rendered> Newest();

  const PageReaderOptions options_;
  BadValues bad_;       // the reading thread only
  RankHashes hashes_;   // the reading thread only
  Mutex mu_;
  std::shared_ptr<const Rendered> rendered_ GUARDED_BY(mu_);
  RedisPoller poller_;  // last: stopped before the fields it writes go
};

}  // namespace ft::master::page

#endif  // FT_FTMASTER_PAGE_READER_H_

#include "ftworker/master_watch.h"

#include <thread>
#include <vector>

#include "common/log.h"
#include "common/mutex.h"
#include "proto/notice.h"
#include "redis/stream_reply.h"
#include "schema/streams.h"

namespace ft::worker {

struct MasterWatch::Shared {
  // Set at construction, read by the thread only.
  std::string commands_key, notify_key;
  std::unique_ptr<redis::Store> store;
  std::chrono::milliseconds block{2000};

  std::atomic<bool> stop{false};
  std::atomic<bool> listening{false};
  Mutex mu;
  MasterNews news GUARDED_BY(mu);

  void Run();
  bool Resync(std::string* commands_id, std::string* notify_id);
  bool ReadOnce(std::string* commands_id, std::string* notify_id, bool blocking);
  bool warned = false;  // a failed read said once (thread only)
};

namespace {

// The id of a stream's newest entry, "0-0" for an empty or missing stream; false on a failure.
bool NewestId(redis::Store& store, const std::string& key, std::string* id) {
  redis::Reply reply;
  if (!store.Run(schema::Newest(key, 1), &reply).ok() || !reply.is_array()) return false;
  *id = "0-0";
  if (reply.size() == 1 && reply[0].is_array() && reply[0].size() == 2 && reply[0][0].is_string()) {
    *id = reply[0][0].str();
  }
  return true;
}

}  // namespace

bool MasterWatch::Shared::Resync(std::string* commands_id, std::string* notify_id) {
  // The newest ids, then one read that does not block: a server that refuses the read (an
  // ACL without xread) is found here, before the daemon is told it can rely on notices.
  if (!NewestId(*store, commands_key, commands_id) || !NewestId(*store, notify_key, notify_id) ||
      !ReadOnce(commands_id, notify_id, /*blocking=*/false)) {
    return false;
  }
  MutexLock lock(&mu);
  news.everything = true;
  return true;
}

bool MasterWatch::Shared::ReadOnce(std::string* commands_id, std::string* notify_id, bool blocking) {
  redis::Argv argv{"XREAD", "COUNT", "64"};
  if (blocking) argv.insert(argv.end(), {"BLOCK", std::to_string(block.count())});
  argv.insert(argv.end(), {"STREAMS", commands_key, notify_key, *commands_id, *notify_id});
  redis::Reply reply;
  Status s = store->Run(argv, &reply);
  if (!s.ok()) {
    if (!warned) {
      FT_LOG(Warn, Worker, "cannot read the master's streams ({}, {}): {}; polling instead (said once)",
             commands_key, notify_key, s.ToString());
      warned = true;
    }
    return false;
  }
  if (reply.is_nil()) return true;  // nothing within block
  MasterNews got;
  for (const redis::Reply& stream : reply.elements()) {
    if (stream.size() != 2 || !stream[0].is_string()) continue;
    const bool commands = stream[0].str() == commands_key;
    std::string* last = commands ? commands_id : notify_id;
    // The cursor passes every entry read, a malformed one too (else it is read again at once,
    // forever).
    for (const redis::Reply& raw : stream[1].elements()) {
      if (raw.is_array() && raw.size() > 0 && raw[0].is_string()) *last = raw[0].str();
    }
    std::vector<redis::StreamEntry> entries;
    redis::ParseStream(stream[1], &entries);
    for (const redis::StreamEntry& entry : entries) {
      if (commands) {
        got.commands = true;
        continue;
      }
      proto::Notice notice;
      if (Status parsed = schema::Decode(entry, &notice); !parsed.ok()) {
        FT_LOG(Warn, Worker, "notice {} on {} ignored: {}", entry.id, notify_key, parsed.message());
        continue;
      }
      switch (notice.kind) {
        case proto::NoticeKind::kTimeouts: got.timeouts = true; break;
        case proto::NoticeKind::kRestore: got.restore = true; break;
        case proto::NoticeKind::kSecret: got.secret = true; break;
        case proto::NoticeKind::kWindow:
          got.window_open = notice.open;
          got.window = notice.window;
          got.window_ranks = notice.ranks;
          break;
      }
    }
  }
  MutexLock lock(&mu);
  news.commands |= got.commands;
  news.timeouts |= got.timeouts;
  news.restore |= got.restore;
  news.secret |= got.secret;
  if (got.window_open) {
    news.window_open = got.window_open;
    news.window = got.window;
    news.window_ranks = got.window_ranks;
  }
  return true;
}

void MasterWatch::Shared::Run() {
  std::string commands_id, notify_id;
  while (!stop.load(std::memory_order_relaxed)) {
    if (!store->Ensure(redis::Store::Clock::now())) {
      listening.store(false, std::memory_order_relaxed);
      commands_id.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // Ensure paces the attempts
      continue;
    }
    // Listening from the moment both streams could be read (Resync's read does not block):
    // the first blocking read may take all of `block` to return, and the daemon writes every
    // table until it hears notices.
    if (!commands_id.empty() || Resync(&commands_id, &notify_id)) {
      if (!listening.exchange(true, std::memory_order_relaxed)) {
        FT_LOG(Info, Worker, "hearing the master on {} and {}", commands_key, notify_key);
        warned = false;
      }
      if (ReadOnce(&commands_id, &notify_id, /*blocking=*/true)) continue;
    }
    // A broken connection, or a server that refuses the read (an ACL without XREAD): the
    // daemon polls meanwhile; try again in a while, not in a loop.
    if (listening.exchange(false, std::memory_order_relaxed)) {
      FT_LOG(Warn, Worker, "not hearing the master's notices any more ({}): polling until it is back",
             store->connected() ? "the read failed" : "Redis is away");
    }
    commands_id.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

MasterWatch::MasterWatch(const proto::Keys& keys, std::string node, std::unique_ptr<redis::Store> store,
                         std::chrono::milliseconds block)
    : shared_(std::make_shared<Shared>()) {
  shared_->commands_key = keys.Commands(node);
  shared_->notify_key = keys.Notify();
  shared_->store = std::move(store);
  shared_->block = block;
  std::thread([shared = shared_] { shared->Run(); }).detach();
}

MasterWatch::~MasterWatch() { shared_->stop.store(true, std::memory_order_relaxed); }

MasterNews MasterWatch::Take() {
  MutexLock lock(&shared_->mu);
  MasterNews out = std::move(shared_->news);
  shared_->news = MasterNews{};
  return out;
}

bool MasterWatch::listening() const { return shared_->listening.load(std::memory_order_relaxed); }

}  // namespace ft::worker

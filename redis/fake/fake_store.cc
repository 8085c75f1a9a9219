#include "redis/fake/fake_store.h"

#include <thread>
#include <utility>

namespace ft::redis {

FakeStore::FakeStore(FakeRedis* server, std::string name)
    : server_(server), name_(std::move(name)) {}

void FakeStore::ClearFaults() {
  fail_after_ = -1;
  failing_.clear();
  delays_.clear();
  down_ = false;
}

void FakeStore::Drop() {
  connected_ = false;
  down_ = true;
}

bool FakeStore::Ensure(Clock::time_point) {
  if (down_) return false;
  if (!connected_) {
    connected_ = true;
    ++connects_;
  }
  return true;
}

Status FakeStore::Admit(const std::string& name) {
  if (!connected_) return Status::Unavailable("Redis at " + name_ + " is not connected");
  auto it = failing_.find(name);
  if (it != failing_.end()) return it->second;
  if (auto delay = delays_.find(name); delay != delays_.end()) {
    std::this_thread::sleep_for(delay->second);
    delays_.erase(delay);
  }
  if (fail_after_ == 0) {
    fail_after_ = -1;
    connected_ = false;
    return Status::Unavailable("Redis at " + name_ + ": connection reset (injected)");
  }
  if (fail_after_ > 0) --fail_after_;
  ++commands_;
  return Status::Ok();
}

Status FakeStore::Result(const std::string& name, const Reply& reply) {
  if (reply.is_error()) return ServerErrorStatus(name_, name, reply.str());
  return Status::Ok();
}

Status FakeStore::Run(const Argv& argv, Reply* out) {
  const std::string name = argv.empty() ? "" : fake::Upper(argv[0]);
  FT_RETURN_IF_ERROR(Admit(name));
  Reply r = server_->Execute(argv);
  FT_RETURN_IF_ERROR(Result(name, r));
  *out = std::move(r);
  return Status::Ok();
}

Status FakeStore::PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) {
  received->clear();
  for (const Argv& argv : commands) {
    const std::string name = argv.empty() ? "" : fake::Upper(argv[0]);
    Status s = Admit(name);
    if (!s.ok()) {
      if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kTimeout) {
        connected_ = false;  // the rest of the pipeline is lost with the connection
        return s;
      }
      received->push_back(Reply::Error("ERR " + std::string(s.message())));
      continue;
    }
    received->push_back(server_->Execute(argv));
  }
  return Status::Ok();
}

Status FakeStore::RenewIfHeld(const std::string& key, const std::string& value, int64_t ms,
                              bool* held) {
  FT_RETURN_IF_ERROR(Admit("RENEW"));
  bool h = false;
  server_->RenewIfHeld(key, value, ms, &h);
  *held = h;
  return Status::Ok();
}

Status FakeStore::DeleteIfHeld(const std::string& key, const std::string& value, bool* held) {
  FT_RETURN_IF_ERROR(Admit("DELETE_IF_HELD"));
  bool h = false;
  server_->DeleteIfHeld(key, value, &h);
  *held = h;
  return Status::Ok();
}

Status FakeStore::FencedRun(const Fence& fence, const std::vector<Argv>& commands, bool* held) {
  FT_RETURN_IF_ERROR(Admit("FENCED"));
  bool h = false;
  Reply r = server_->FencedRun(fence, commands, &h);
  FT_RETURN_IF_ERROR(Result("EVAL", r));
  *held = h;
  return Status::Ok();
}

Status FakeStore::FencedGatedAppend(const Fence& fence, const GatedAppend& append,
                                    std::vector<bool>* won, bool* held) {
  FT_RETURN_IF_ERROR(Admit("GATED_APPEND"));
  bool h = false;
  std::vector<bool> w;
  Reply r = server_->FencedGatedAppend(fence, append, &w, &h);
  FT_RETURN_IF_ERROR(Result("EVAL", r));
  *held = h;
  *won = std::move(w);
  return Status::Ok();
}

}  // namespace ft::redis

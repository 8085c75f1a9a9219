#include "redis/fake/fake_store.h"

namespace ft::redis {

Reply FakeRedis::Execute(const Argv& a) {
  ++executed_;
  if (a.empty()) return Reply::Error("ERR empty command");
  fake::Handler handler = fake::FindHandler(fake::Upper(a[0]));
  if (handler == nullptr) return Reply::Error("ERR unknown command '" + a[0] + "' (the fake speaks what ft uses)");
  return handler(keys_, a);
}

Reply FakeRedis::RenewIfHeld(const std::string& key, const std::string& value, int64_t ms,
                             bool* held) {
  fake::Value* v = keys_.Find(key);
  *held = v != nullptr && v->type == fake::Type::kString && v->str == value;
  if (*held) v->expires_unix_ms = keys_.unix_ms + ms;
  return Reply::Integer(*held ? 1 : 0);
}

Reply FakeRedis::DeleteIfHeld(const std::string& key, const std::string& value, bool* held) {
  fake::Value* v = keys_.Find(key);
  *held = v != nullptr && v->type == fake::Type::kString && v->str == value;
  if (*held) keys_.Erase(key);
  return Reply::Integer(*held ? 1 : 0);
}

Reply FakeRedis::FencedRun(const Fence& fence, const std::vector<Argv>& commands, bool* held) {
  std::optional<std::string> holder = Get(fence.key);
  *held = holder && *holder == fence.value;
  if (!*held) return Reply::Integer(-1);
  // As in a Lua script: an error stops the script there; what ran before stays.
  for (const Argv& c : commands) {
    Reply r = Execute(c);
    if (r.is_error()) return r;
  }
  return Reply::Integer(static_cast<int64_t>(commands.size()));
}

Reply FakeRedis::FencedGatedAppend(const Fence& fence, const GatedAppend& g,
                                   std::vector<bool>* won, bool* held) {
  won->clear();
  std::optional<std::string> holder = Get(fence.key);
  *held = holder && *holder == fence.value;
  if (!*held) return Reply::Integer(-1);
  bool any = false;
  for (const GatedAppend::Entry& e : g.entries) {
    Reply gate = Execute({"HSETNX", g.gate_hash, e.gate, g.gate_value});
    if (gate.is_error()) return gate;
    if (gate.integer() != 1) {
      won->push_back(false);
      continue;
    }
    Argv xadd = {"XADD", g.stream, "MAXLEN", "~", g.stream_cap, "*"};
    xadd.insert(xadd.end(), e.fields.begin(), e.fields.end());
    Reply r = Execute(xadd);
    if (r.is_error()) {
      Execute({"HDEL", g.gate_hash, e.gate});
      return r;
    }
    won->push_back(true);
    any = true;
  }
  if (any) {
    for (const Argv& c : g.on_any_win) {
      Reply r = Execute(c);
      if (r.is_error()) return r;
    }
  }
  for (const Argv& c : g.always) {
    Reply r = Execute(c);
    if (r.is_error()) return r;
  }
  return Reply::Integer(1);
}

std::optional<std::string> FakeRedis::Get(const std::string& key) {
  fake::Value* v = keys_.Find(key);
  if (v == nullptr || v->type != fake::Type::kString) return std::nullopt;
  return v->str;
}

std::optional<std::string> FakeRedis::HGet(const std::string& key, const std::string& field) {
  fake::Value* v = keys_.Find(key);
  if (v == nullptr || v->type != fake::Type::kHash) return std::nullopt;
  auto it = v->hash.find(field);
  if (it == v->hash.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, std::string> FakeRedis::HGetAll(const std::string& key) {
  fake::Value* v = keys_.Find(key);
  if (v == nullptr || v->type != fake::Type::kHash) return {};
  return v->hash;
}

std::set<std::string> FakeRedis::Members(const std::string& key) {
  fake::Value* v = keys_.Find(key);
  if (v == nullptr || v->type != fake::Type::kSet) return {};
  return v->set;
}

std::vector<FakeRedis::StreamEntry> FakeRedis::Stream(const std::string& key) {
  fake::Value* v = keys_.Find(key);
  if (v == nullptr || v->type != fake::Type::kStream) return {};
  return v->stream;
}

bool FakeRedis::Exists(const std::string& key) { return keys_.Find(key) != nullptr; }

}  // namespace ft::redis

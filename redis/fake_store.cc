#include "redis/fake_store.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace ft::redis {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool ToInt(const std::string& s, int64_t* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

Reply Err(const std::string& message) { return Reply::Error(message); }

// A score as Redis prints it: "100", "2.5" (%.17g drops what a double does not hold).
std::string ScoreText(double score) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", score);
  return buf;
}
Reply WrongArgs(const std::string& command) {
  return Err("ERR wrong number of arguments for '" + command + "' command");
}

// A stream id bound of XRANGE: "-", "+", "<ms>", "<ms>-<seq>", "(" prefix = exclusive.
bool ParseBound(const std::string& text, bool is_end, uint64_t* ms, uint64_t* seq, bool* exclusive) {
  std::string t = text;
  *exclusive = !t.empty() && t[0] == '(';
  if (*exclusive) t = t.substr(1);
  if (t == "-") {
    *ms = 0;
    *seq = 0;
    return !*exclusive;
  }
  if (t == "+") {
    *ms = *seq = std::numeric_limits<uint64_t>::max();
    return !*exclusive;
  }
  const size_t dash = t.find('-');
  int64_t a = 0, b = 0;
  if (dash == std::string::npos) {
    if (!ToInt(t, &a) || a < 0) return false;
    *ms = static_cast<uint64_t>(a);
    *seq = is_end ? std::numeric_limits<uint64_t>::max() : 0;
    return true;
  }
  if (!ToInt(t.substr(0, dash), &a) || !ToInt(t.substr(dash + 1), &b) || a < 0 || b < 0) return false;
  *ms = static_cast<uint64_t>(a);
  *seq = static_cast<uint64_t>(b);
  return true;
}

Reply EntryReply(const FakeRedis::StreamEntry& e) {
  std::vector<Reply> fields;
  for (const std::string& f : e.fields) fields.push_back(Reply::String(f));
  return Reply::Array({Reply::String(e.Id()), Reply::Array(std::move(fields))});
}

}  // namespace

// ---- FakeRedis ------------------------------------------------------------------------------

FakeRedis::Value* FakeRedis::Find(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return nullptr;
  if (it->second.expires_unix_ms != 0 && it->second.expires_unix_ms <= unix_ms_) {
    data_.erase(it);
    return nullptr;
  }
  return &it->second;
}

FakeRedis::Value* FakeRedis::FindTyped(const std::string& key, Type type, Reply* wrongtype) {
  Value* v = Find(key);
  if (v != nullptr && v->type != type) {
    *wrongtype = Err("WRONGTYPE Operation against a key holding the wrong kind of value");
    return nullptr;
  }
  return v;
}

FakeRedis::Value& FakeRedis::Create(const std::string& key, Type type) {
  Value& v = data_[key];
  v = Value{};
  v.type = type;
  return v;
}

Reply FakeRedis::Execute(const Argv& a) {
  ++executed_;
  if (a.empty()) return Err("ERR empty command");
  const std::string cmd = Upper(a[0]);
  Reply wrong;
  if (cmd == "PING") return Reply::Simple("PONG");
  if (cmd == "GET") {
    if (a.size() != 2) return WrongArgs("get");
    Value* v = FindTyped(a[1], Type::kString, &wrong);
    if (wrong.is_error()) return wrong;
    return v ? Reply::String(v->str) : Reply::Nil();
  }
  if (cmd == "STRLEN") {
    if (a.size() != 2) return WrongArgs("strlen");
    Value* v = FindTyped(a[1], Type::kString, &wrong);
    if (wrong.is_error()) return wrong;
    return Reply::Integer(v ? static_cast<int64_t>(v->str.size()) : 0);
  }
  if (cmd == "SET") return Set(a);
  if (cmd == "DEL") {
    int64_t n = 0;
    for (size_t i = 1; i < a.size(); ++i) n += Find(a[i]) != nullptr && data_.erase(a[i]) ? 1 : 0;
    return Reply::Integer(n);
  }
  if (cmd == "EXISTS") {
    int64_t n = 0;
    for (size_t i = 1; i < a.size(); ++i) n += Find(a[i]) != nullptr ? 1 : 0;
    return Reply::Integer(n);
  }
  if (cmd == "PEXPIRE") {
    int64_t ms = 0;
    if (a.size() != 3 || !ToInt(a[2], &ms)) return WrongArgs("pexpire");
    Value* v = Find(a[1]);
    if (v == nullptr) return Reply::Integer(0);
    v->expires_unix_ms = unix_ms_ + ms;
    return Reply::Integer(1);
  }
  if (cmd == "HSET" || cmd == "HSETNX") {
    if (a.size() < 4 || (a.size() % 2) != 0 || (cmd == "HSETNX" && a.size() != 4)) {
      return WrongArgs(Upper(cmd) == "HSET" ? "hset" : "hsetnx");
    }
    Value* v = FindTyped(a[1], Type::kHash, &wrong);
    if (wrong.is_error()) return wrong;
    if (v == nullptr) v = &Create(a[1], Type::kHash);
    int64_t added = 0;
    for (size_t i = 2; i + 1 < a.size(); i += 2) {
      auto it = v->hash.find(a[i]);
      if (it != v->hash.end()) {
        if (cmd == "HSETNX") return Reply::Integer(0);
        it->second = a[i + 1];
      } else {
        v->hash.emplace(a[i], a[i + 1]);
        ++added;
      }
    }
    return Reply::Integer(added);
  }
  if (cmd == "HGET") {
    if (a.size() != 3) return WrongArgs("hget");
    Value* v = FindTyped(a[1], Type::kHash, &wrong);
    if (wrong.is_error()) return wrong;
    if (v == nullptr) return Reply::Nil();
    auto it = v->hash.find(a[2]);
    return it == v->hash.end() ? Reply::Nil() : Reply::String(it->second);
  }
  if (cmd == "HDEL") {
    if (a.size() < 3) return WrongArgs("hdel");
    Value* v = FindTyped(a[1], Type::kHash, &wrong);
    if (wrong.is_error()) return wrong;
    int64_t n = 0;
    if (v != nullptr) {
      for (size_t i = 2; i < a.size(); ++i) n += static_cast<int64_t>(v->hash.erase(a[i]));
      if (v->hash.empty()) data_.erase(a[1]);
    }
    return Reply::Integer(n);
  }
  if (cmd == "HGETALL") {
    if (a.size() != 2) return WrongArgs("hgetall");
    Value* v = FindTyped(a[1], Type::kHash, &wrong);
    if (wrong.is_error()) return wrong;
    std::vector<Reply> out;
    if (v != nullptr) {
      for (const auto& [f, val] : v->hash) {
        out.push_back(Reply::String(f));
        out.push_back(Reply::String(val));
      }
    }
    return Reply::Array(std::move(out));
  }
  if (cmd == "HMGET") {
    if (a.size() < 3) return WrongArgs("hmget");
    Value* v = FindTyped(a[1], Type::kHash, &wrong);
    if (wrong.is_error()) return wrong;
    std::vector<Reply> out;
    for (size_t i = 2; i < a.size(); ++i) {
      if (v == nullptr) {
        out.push_back(Reply::Nil());
        continue;
      }
      auto it = v->hash.find(a[i]);
      out.push_back(it != v->hash.end() ? Reply::String(it->second) : Reply::Nil());
    }
    return Reply::Array(std::move(out));
  }
  if (cmd == "HSCAN") {
    // The cursor is the index of the next field in name order; COUNT as given (default 10).
    int64_t cursor = 0, count = 10;
    if (a.size() < 3 || !ToInt(a[2], &cursor) || cursor < 0) return WrongArgs("hscan");
    for (size_t i = 3; i + 1 < a.size(); i += 2) {
      if (Upper(a[i]) != "COUNT" || !ToInt(a[i + 1], &count) || count < 1) {
        return WrongArgs("hscan");
      }
    }
    Value* v = FindTyped(a[1], Type::kHash, &wrong);
    if (wrong.is_error()) return wrong;
    std::vector<Reply> pairs;
    int64_t next = 0;
    if (v != nullptr) {
      int64_t i = 0;
      for (const auto& [f, val] : v->hash) {
        if (i++ < cursor) continue;
        pairs.push_back(Reply::String(f));
        pairs.push_back(Reply::String(val));
        if (static_cast<int64_t>(pairs.size()) / 2 == count) break;
      }
      next = cursor + static_cast<int64_t>(pairs.size()) / 2;
      if (next >= static_cast<int64_t>(v->hash.size())) next = 0;
    }
    std::vector<Reply> out;
    out.push_back(Reply::String(std::to_string(next)));
    out.push_back(Reply::Array(std::move(pairs)));
    return Reply::Array(std::move(out));
  }
  if (cmd == "INCR") {
    if (a.size() != 2) return WrongArgs("incr");
    Value* v = FindTyped(a[1], Type::kString, &wrong);
    if (wrong.is_error()) return wrong;
    int64_t n = 0;
    if (v == nullptr) {
      v = &Create(a[1], Type::kString);
    } else if (!ToInt(v->str, &n)) {
      return Err("ERR value is not an integer or out of range");
    }
    v->str = std::to_string(++n);
    return Reply::Integer(n);
  }
  if (cmd == "SADD") {
    if (a.size() < 3) return WrongArgs("sadd");
    Value* v = FindTyped(a[1], Type::kSet, &wrong);
    if (wrong.is_error()) return wrong;
    if (v == nullptr) v = &Create(a[1], Type::kSet);
    int64_t n = 0;
    for (size_t i = 2; i < a.size(); ++i) n += v->set.insert(a[i]).second ? 1 : 0;
    return Reply::Integer(n);
  }
  if (cmd == "SREM") {
    if (a.size() < 3) return WrongArgs("srem");
    Value* v = FindTyped(a[1], Type::kSet, &wrong);
    if (wrong.is_error()) return wrong;
    int64_t n = 0;
    if (v != nullptr) {
      for (size_t i = 2; i < a.size(); ++i) n += static_cast<int64_t>(v->set.erase(a[i]));
      if (v->set.empty()) data_.erase(a[1]);
    }
    return Reply::Integer(n);
  }
  if (cmd == "SMEMBERS") {
    if (a.size() != 2) return WrongArgs("smembers");
    Value* v = FindTyped(a[1], Type::kSet, &wrong);
    if (wrong.is_error()) return wrong;
    std::vector<Reply> out;
    if (v != nullptr) {
      for (const std::string& m : v->set) out.push_back(Reply::String(m));
    }
    return Reply::Array(std::move(out));
  }
  if (cmd == "SCARD") {
    if (a.size() != 2) return WrongArgs("scard");
    Value* v = FindTyped(a[1], Type::kSet, &wrong);
    if (wrong.is_error()) return wrong;
    return Reply::Integer(v == nullptr ? 0 : static_cast<int64_t>(v->set.size()));
  }
  if (cmd == "HLEN") {
    if (a.size() != 2) return WrongArgs("hlen");
    Value* v = FindTyped(a[1], Type::kHash, &wrong);
    if (wrong.is_error()) return wrong;
    return Reply::Integer(v == nullptr ? 0 : static_cast<int64_t>(v->hash.size()));
  }
  if (cmd == "ZADD") {
    // ZADD key score member [score member ...] (no flags: ft uses none).
    if (a.size() < 4 || (a.size() % 2) != 0) return WrongArgs("zadd");
    Value* v = FindTyped(a[1], Type::kZset, &wrong);
    if (wrong.is_error()) return wrong;
    std::vector<std::pair<double, std::string>> adds;
    for (size_t i = 2; i + 1 < a.size(); i += 2) {
      char* end = nullptr;
      const double score = std::strtod(a[i].c_str(), &end);
      if (end == a[i].c_str() || *end != '\0') return Err("ERR value is not a valid float");
      adds.emplace_back(score, a[i + 1]);
    }
    if (v == nullptr) v = &Create(a[1], Type::kZset);
    int64_t n = 0;
    for (const auto& [score, member] : adds) {
      n += v->zset.count(member) ? 0 : 1;
      v->zset[member] = score;
    }
    return Reply::Integer(n);
  }
  if (cmd == "ZREM") {
    if (a.size() < 3) return WrongArgs("zrem");
    Value* v = FindTyped(a[1], Type::kZset, &wrong);
    if (wrong.is_error()) return wrong;
    int64_t n = 0;
    if (v != nullptr) {
      for (size_t i = 2; i < a.size(); ++i) n += static_cast<int64_t>(v->zset.erase(a[i]));
      if (v->zset.empty()) data_.erase(a[1]);
    }
    return Reply::Integer(n);
  }
  if (cmd == "ZSCORE") {
    if (a.size() != 3) return WrongArgs("zscore");
    Value* v = FindTyped(a[1], Type::kZset, &wrong);
    if (wrong.is_error()) return wrong;
    if (v == nullptr || !v->zset.count(a[2])) return Reply::Nil();
    return Reply::String(ScoreText(v->zset.at(a[2])));
  }
  if (cmd == "ZRANGE" || cmd == "ZREVRANGE") {
    // By index over (score, member), ascending or descending; no options.
    int64_t start = 0, stop = 0;
    if (a.size() != 4 || !ToInt(a[2], &start) || !ToInt(a[3], &stop)) return WrongArgs(cmd == "ZRANGE" ? "zrange" : "zrevrange");
    Value* v = FindTyped(a[1], Type::kZset, &wrong);
    if (wrong.is_error()) return wrong;
    std::vector<std::pair<double, std::string>> sorted;
    if (v != nullptr) {
      for (const auto& [member, score] : v->zset) sorted.emplace_back(score, member);
    }
    std::sort(sorted.begin(), sorted.end());
    if (cmd == "ZREVRANGE") std::reverse(sorted.begin(), sorted.end());
    const int64_t n = static_cast<int64_t>(sorted.size());
    if (start < 0) start = std::max<int64_t>(0, n + start);
    if (stop < 0) stop = n + stop;
    stop = std::min(stop, n - 1);
    std::vector<Reply> out;
    for (int64_t i = start; i <= stop; ++i) out.push_back(Reply::String(sorted[static_cast<size_t>(i)].second));
    return Reply::Array(std::move(out));
  }
  if (cmd == "ZREMRANGEBYRANK") {
    // By index over (score, member) ascending, negative indexes from the end.
    int64_t start = 0, stop = 0;
    if (a.size() != 4 || !ToInt(a[2], &start) || !ToInt(a[3], &stop)) return WrongArgs("zremrangebyrank");
    Value* v = FindTyped(a[1], Type::kZset, &wrong);
    if (wrong.is_error()) return wrong;
    if (v == nullptr) return Reply::Integer(0);
    std::vector<std::pair<double, std::string>> sorted;
    for (const auto& [member, score] : v->zset) sorted.emplace_back(score, member);
    std::sort(sorted.begin(), sorted.end());
    const int64_t n = static_cast<int64_t>(sorted.size());
    if (start < 0) start = std::max<int64_t>(0, n + start);
    if (stop < 0) stop = n + stop;
    stop = std::min(stop, n - 1);
    int64_t removed = 0;
    for (int64_t i = start; i <= stop; ++i) removed += static_cast<int64_t>(v->zset.erase(sorted[static_cast<size_t>(i)].second));
    if (v->zset.empty()) data_.erase(a[1]);
    return Reply::Integer(removed);
  }
  if (cmd == "XLEN") {
    if (a.size() != 2) return WrongArgs("xlen");
    Value* v = FindTyped(a[1], Type::kStream, &wrong);
    if (wrong.is_error()) return wrong;
    return Reply::Integer(v == nullptr ? 0 : static_cast<int64_t>(v->stream.size()));
  }
  if (cmd == "XADD") return XAdd(a);
  if (cmd == "XRANGE") return XRange(a, false);
  if (cmd == "XREVRANGE") return XRange(a, true);
  return Err("ERR unknown command '" + a[0] + "' (the fake speaks what ft uses)");
}

Reply FakeRedis::Set(const Argv& a) {
  if (a.size() < 3) return WrongArgs("set");
  bool nx = false, xx = false;
  int64_t ttl_ms = 0;
  for (size_t i = 3; i < a.size(); ++i) {
    const std::string opt = Upper(a[i]);
    int64_t n = 0;
    if (opt == "NX") {
      nx = true;
    } else if (opt == "XX") {
      xx = true;
    } else if ((opt == "PX" || opt == "EX") && i + 1 < a.size() && ToInt(a[i + 1], &n) && n > 0) {
      ttl_ms = opt == "PX" ? n : n * 1000;
      ++i;
    } else {
      return Err("ERR syntax error");
    }
  }
  Value* v = Find(a[1]);
  if ((nx && v != nullptr) || (xx && v == nullptr)) return Reply::Nil();
  Value& nv = Create(a[1], Type::kString);
  nv.str = a[2];
  nv.expires_unix_ms = ttl_ms > 0 ? unix_ms_ + ttl_ms : 0;
  return Reply::Simple("OK");
}

Reply FakeRedis::XAdd(const Argv& a) {
  // XADD key [MAXLEN [~|=] n] * field value [field value ...]
  size_t i = 2;
  int64_t cap = -1;
  if (i < a.size() && Upper(a[i]) == "MAXLEN") {
    ++i;
    if (i < a.size() && (a[i] == "~" || a[i] == "=")) ++i;
    if (i >= a.size() || !ToInt(a[i], &cap) || cap < 0) return Err("ERR syntax error");
    ++i;
  }
  if (i >= a.size() || a[i] != "*") return Err("ERR the fake takes only '*' ids");
  ++i;
  if (i >= a.size() || (a.size() - i) % 2 != 0) return WrongArgs("xadd");
  Reply wrong;
  Value* v = FindTyped(a[1], Type::kStream, &wrong);
  if (wrong.is_error()) return wrong;
  if (v == nullptr) v = &Create(a[1], Type::kStream);
  StreamEntry e;
  const uint64_t now = static_cast<uint64_t>(std::max<int64_t>(unix_ms_, 0));
  if (now > v->last_ms) {
    e.ms = now;
    e.seq = 0;
  } else {
    e.ms = v->last_ms;
    e.seq = v->last_seq + 1;
  }
  v->last_ms = e.ms;
  v->last_seq = e.seq;
  e.fields.assign(a.begin() + static_cast<long>(i), a.end());
  v->stream.push_back(e);
  if (cap >= 0 && v->stream.size() > static_cast<size_t>(cap)) {
    v->stream.erase(v->stream.begin(), v->stream.end() - cap);
  }
  return Reply::String(e.Id());
}

Reply FakeRedis::XRange(const Argv& a, bool reverse) {
  const char* name = reverse ? "xrevrange" : "xrange";
  if (a.size() != 4 && a.size() != 6) return WrongArgs(name);
  int64_t count = -1;
  if (a.size() == 6) {
    if (Upper(a[4]) != "COUNT" || !ToInt(a[5], &count)) return Err("ERR syntax error");
  }
  const std::string& lo_text = reverse ? a[3] : a[2];
  const std::string& hi_text = reverse ? a[2] : a[3];
  uint64_t lo_ms, lo_seq, hi_ms, hi_seq;
  bool lo_ex, hi_ex;
  if (!ParseBound(lo_text, false, &lo_ms, &lo_seq, &lo_ex) ||
      !ParseBound(hi_text, true, &hi_ms, &hi_seq, &hi_ex)) {
    return Err("ERR Invalid stream ID specified as stream command argument");
  }
  Reply wrong;
  Value* v = FindTyped(a[1], Type::kStream, &wrong);
  if (wrong.is_error()) return wrong;
  std::vector<Reply> out;
  if (v == nullptr || count == 0) return Reply::Array({});
  auto after_lo = [&](const StreamEntry& e) {
    auto k = std::make_pair(e.ms, e.seq), l = std::make_pair(lo_ms, lo_seq);
    return lo_ex ? k > l : k >= l;
  };
  auto before_hi = [&](const StreamEntry& e) {
    auto k = std::make_pair(e.ms, e.seq), h = std::make_pair(hi_ms, hi_seq);
    return hi_ex ? k < h : k <= h;
  };
  auto take = [&](const StreamEntry& e) {
    if (!after_lo(e) || !before_hi(e)) return true;
    out.push_back(EntryReply(e));
    return count < 0 || static_cast<int64_t>(out.size()) < count;
  };
  if (reverse) {
    for (auto it = v->stream.rbegin(); it != v->stream.rend() && take(*it);) ++it;
  } else {
    for (auto it = v->stream.begin(); it != v->stream.end() && take(*it);) ++it;
  }
  return Reply::Array(std::move(out));
}

Reply FakeRedis::RenewIfHeld(const std::string& key, const std::string& value, int64_t ms,
                             bool* held) {
  Value* v = Find(key);
  *held = v != nullptr && v->type == Type::kString && v->str == value;
  if (*held) v->expires_unix_ms = unix_ms_ + ms;
  return Reply::Integer(*held ? 1 : 0);
}

Reply FakeRedis::DeleteIfHeld(const std::string& key, const std::string& value, bool* held) {
  Value* v = Find(key);
  *held = v != nullptr && v->type == Type::kString && v->str == value;
  if (*held) data_.erase(key);
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
  Value* v = Find(key);
  if (v == nullptr || v->type != Type::kString) return std::nullopt;
  return v->str;
}

std::optional<std::string> FakeRedis::HGet(const std::string& key, const std::string& field) {
  Value* v = Find(key);
  if (v == nullptr || v->type != Type::kHash) return std::nullopt;
  auto it = v->hash.find(field);
  if (it == v->hash.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, std::string> FakeRedis::HGetAll(const std::string& key) {
  Value* v = Find(key);
  if (v == nullptr || v->type != Type::kHash) return {};
  return v->hash;
}

std::set<std::string> FakeRedis::Members(const std::string& key) {
  Value* v = Find(key);
  if (v == nullptr || v->type != Type::kSet) return {};
  return v->set;
}

std::vector<FakeRedis::StreamEntry> FakeRedis::Stream(const std::string& key) {
  Value* v = Find(key);
  if (v == nullptr || v->type != Type::kStream) return {};
  return v->stream;
}

bool FakeRedis::Exists(const std::string& key) { return Find(key) != nullptr; }

// ---- FakeStore ------------------------------------------------------------------------------

FakeStore::FakeStore(FakeRedis* server, std::string name)
    : server_(server), name_(std::move(name)) {}

void FakeStore::ClearFaults() {
  fail_after_ = -1;
  failing_.clear();
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
  const std::string name = argv.empty() ? "" : Upper(argv[0]);
  FT_RETURN_IF_ERROR(Admit(name));
  Reply r = server_->Execute(argv);
  FT_RETURN_IF_ERROR(Result(name, r));
  *out = std::move(r);
  return Status::Ok();
}

Status FakeStore::PipelinePartial(const std::vector<Argv>& commands, std::vector<Reply>* received) {
  received->clear();
  for (const Argv& argv : commands) {
    const std::string name = argv.empty() ? "" : Upper(argv[0]);
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

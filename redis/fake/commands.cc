// The fake's commands, by family: keys and strings, hashes, sets, sorted sets, streams. Replies
// and errors are Redis's for what ft sends; anything else is refused by name (FakeRedis).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <utility>

#include "redis/fake/keyspace.h"

namespace ft::redis::fake {
namespace {

Reply Err(const std::string& message) { return Reply::Error(message); }

Reply WrongArgs(const std::string& command) {
  return Err("ERR wrong number of arguments for '" + command + "' command");
}

// How many members one key holds (STRLEN, HLEN, SCARD, XLEN): 0 for a missing key.
template <typename Size>
Reply CountOf(Keyspace& keys, const Argv& a, const char* name, Type type, Size size) {
  if (a.size() != 2) return WrongArgs(name);
  Reply wrong;
  Value* v = keys.FindTyped(a[1], type, &wrong);
  if (wrong.is_error()) return wrong;
  return Reply::Integer(v == nullptr ? 0 : static_cast<int64_t>(size(*v)));
}

// Removes a[2..] from one key's members (HDEL, SREM, ZREM); the key goes with its last member.
template <typename Members>
Reply RemoveMembers(Keyspace& keys, const Argv& a, const char* name, Type type, Members members) {
  if (a.size() < 3) return WrongArgs(name);
  Reply wrong;
  Value* v = keys.FindTyped(a[1], type, &wrong);
  if (wrong.is_error()) return wrong;
  int64_t n = 0;
  if (v != nullptr) {
    auto& all = members(*v);
    for (size_t i = 2; i < a.size(); ++i) n += static_cast<int64_t>(all.erase(a[i]));
    if (all.empty()) keys.Erase(a[1]);
  }
  return Reply::Integer(n);
}

// ---- keys and strings -----------------------------------------------------------------------

Reply Ping(Keyspace&, const Argv&) { return Reply::Simple("PONG"); }

Reply Get(Keyspace& keys, const Argv& a) {
  if (a.size() != 2) return WrongArgs("get");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kString, &wrong);
  if (wrong.is_error()) return wrong;
  return v ? Reply::String(v->str) : Reply::Nil();
}

Reply StrLen(Keyspace& keys, const Argv& a) {
  return CountOf(keys, a, "strlen", Type::kString, [](const Value& v) { return v.str.size(); });
}

Reply Set(Keyspace& keys, const Argv& a) {
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
  Value* v = keys.Find(a[1]);
  if ((nx && v != nullptr) || (xx && v == nullptr)) return Reply::Nil();
  Value& nv = keys.Create(a[1], Type::kString);
  nv.str = a[2];
  nv.expires_unix_ms = ttl_ms > 0 ? keys.unix_ms + ttl_ms : 0;
  return Reply::Simple("OK");
}

Reply Del(Keyspace& keys, const Argv& a) {
  int64_t n = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    if (keys.Find(a[i]) == nullptr) continue;
    keys.Erase(a[i]);
    ++n;
  }
  return Reply::Integer(n);
}

Reply Exists(Keyspace& keys, const Argv& a) {
  int64_t n = 0;
  for (size_t i = 1; i < a.size(); ++i) n += keys.Find(a[i]) != nullptr ? 1 : 0;
  return Reply::Integer(n);
}

Reply PExpire(Keyspace& keys, const Argv& a) {
  int64_t ms = 0;
  if (a.size() != 3 || !ToInt(a[2], &ms)) return WrongArgs("pexpire");
  Value* v = keys.Find(a[1]);
  if (v == nullptr) return Reply::Integer(0);
  v->expires_unix_ms = keys.unix_ms + ms;
  return Reply::Integer(1);
}

Reply Incr(Keyspace& keys, const Argv& a) {
  if (a.size() != 2) return WrongArgs("incr");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kString, &wrong);
  if (wrong.is_error()) return wrong;
  int64_t n = 0;
  if (v == nullptr) {
    v = &keys.Create(a[1], Type::kString);
  } else if (!ToInt(v->str, &n)) {
    return Err("ERR value is not an integer or out of range");
  }
  v->str = std::to_string(++n);
  return Reply::Integer(n);
}

// ---- hashes ---------------------------------------------------------------------------------

Reply HSetAny(Keyspace& keys, const Argv& a, bool nx) {
  if (a.size() < 4 || (a.size() % 2) != 0 || (nx && a.size() != 4)) return WrongArgs(nx ? "hsetnx" : "hset");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kHash, &wrong);
  if (wrong.is_error()) return wrong;
  if (v == nullptr) v = &keys.Create(a[1], Type::kHash);
  int64_t added = 0;
  for (size_t i = 2; i + 1 < a.size(); i += 2) {
    auto it = v->hash.find(a[i]);
    if (it != v->hash.end()) {
      if (nx) return Reply::Integer(0);
      it->second = a[i + 1];
    } else {
      v->hash.emplace(a[i], a[i + 1]);
      ++added;
    }
  }
  return Reply::Integer(added);
}
Reply HSet(Keyspace& keys, const Argv& a) { return HSetAny(keys, a, false); }
Reply HSetNx(Keyspace& keys, const Argv& a) { return HSetAny(keys, a, true); }

Reply HGet(Keyspace& keys, const Argv& a) {
  if (a.size() != 3) return WrongArgs("hget");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kHash, &wrong);
  if (wrong.is_error()) return wrong;
  if (v == nullptr) return Reply::Nil();
  auto it = v->hash.find(a[2]);
  return it == v->hash.end() ? Reply::Nil() : Reply::String(it->second);
}

Reply HDel(Keyspace& keys, const Argv& a) {
  return RemoveMembers(keys, a, "hdel", Type::kHash, [](Value& v) -> auto& { return v.hash; });
}

Reply HGetAll(Keyspace& keys, const Argv& a) {
  if (a.size() != 2) return WrongArgs("hgetall");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kHash, &wrong);
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

Reply HMGet(Keyspace& keys, const Argv& a) {
  if (a.size() < 3) return WrongArgs("hmget");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kHash, &wrong);
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

// The cursor is the index of the next field in name order; COUNT as given (default 10).
Reply HScan(Keyspace& keys, const Argv& a) {
  int64_t cursor = 0, count = 10;
  if (a.size() < 3 || !ToInt(a[2], &cursor) || cursor < 0) return WrongArgs("hscan");
  for (size_t i = 3; i + 1 < a.size(); i += 2) {
    if (Upper(a[i]) != "COUNT" || !ToInt(a[i + 1], &count) || count < 1) return WrongArgs("hscan");
  }
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kHash, &wrong);
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

Reply HLen(Keyspace& keys, const Argv& a) {
  return CountOf(keys, a, "hlen", Type::kHash, [](const Value& v) { return v.hash.size(); });
}

// ---- sets -----------------------------------------------------------------------------------

Reply SAdd(Keyspace& keys, const Argv& a) {
  if (a.size() < 3) return WrongArgs("sadd");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kSet, &wrong);
  if (wrong.is_error()) return wrong;
  if (v == nullptr) v = &keys.Create(a[1], Type::kSet);
  int64_t n = 0;
  for (size_t i = 2; i < a.size(); ++i) n += v->set.insert(a[i]).second ? 1 : 0;
  return Reply::Integer(n);
}

Reply SRem(Keyspace& keys, const Argv& a) {
  return RemoveMembers(keys, a, "srem", Type::kSet, [](Value& v) -> auto& { return v.set; });
}

Reply SMembers(Keyspace& keys, const Argv& a) {
  if (a.size() != 2) return WrongArgs("smembers");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kSet, &wrong);
  if (wrong.is_error()) return wrong;
  std::vector<Reply> out;
  if (v != nullptr) {
    for (const std::string& m : v->set) out.push_back(Reply::String(m));
  }
  return Reply::Array(std::move(out));
}

Reply SCard(Keyspace& keys, const Argv& a) {
  return CountOf(keys, a, "scard", Type::kSet, [](const Value& v) { return v.set.size(); });
}

// ---- sorted sets ----------------------------------------------------------------------------

// A score as Redis prints it: "100", "2.5" (%.17g drops what a double does not hold).
std::string ScoreText(double score) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", score);
  return buf;
}

// The members by (score, member) ascending, and [start, stop] of them as ZRANGE's indexes say
// (negative: from the end; stop past the end: the last).
std::vector<std::pair<double, std::string>> ByRank(const Value* v) {
  std::vector<std::pair<double, std::string>> sorted;
  if (v != nullptr) {
    for (const auto& [member, score] : v->zset) sorted.emplace_back(score, member);
  }
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}
void ClampRanks(int64_t n, int64_t* start, int64_t* stop) {
  if (*start < 0) *start = std::max<int64_t>(0, n + *start);
  if (*stop < 0) *stop = n + *stop;
  *stop = std::min(*stop, n - 1);
}

// ZADD key score member [score member ...] (no flags: ft uses none).
Reply ZAdd(Keyspace& keys, const Argv& a) {
  if (a.size() < 4 || (a.size() % 2) != 0) return WrongArgs("zadd");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kZset, &wrong);
  if (wrong.is_error()) return wrong;
  std::vector<std::pair<double, std::string>> adds;
  for (size_t i = 2; i + 1 < a.size(); i += 2) {
    char* end = nullptr;
    const double score = std::strtod(a[i].c_str(), &end);
    if (end == a[i].c_str() || *end != '\0') return Err("ERR value is not a valid float");
    adds.emplace_back(score, a[i + 1]);
  }
  if (v == nullptr) v = &keys.Create(a[1], Type::kZset);
  int64_t n = 0;
  for (const auto& [score, member] : adds) {
    n += v->zset.count(member) ? 0 : 1;
    v->zset[member] = score;
  }
  return Reply::Integer(n);
}

Reply ZRem(Keyspace& keys, const Argv& a) {
  return RemoveMembers(keys, a, "zrem", Type::kZset, [](Value& v) -> auto& { return v.zset; });
}

Reply ZScore(Keyspace& keys, const Argv& a) {
  if (a.size() != 3) return WrongArgs("zscore");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kZset, &wrong);
  if (wrong.is_error()) return wrong;
  if (v == nullptr || !v->zset.count(a[2])) return Reply::Nil();
  return Reply::String(ScoreText(v->zset.at(a[2])));
}

// By index over (score, member), ascending or descending; no options.
Reply ZRangeAny(Keyspace& keys, const Argv& a, bool reverse) {
  int64_t start = 0, stop = 0;
  if (a.size() != 4 || !ToInt(a[2], &start) || !ToInt(a[3], &stop)) return WrongArgs(reverse ? "zrevrange" : "zrange");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kZset, &wrong);
  if (wrong.is_error()) return wrong;
  std::vector<std::pair<double, std::string>> sorted = ByRank(v);
  if (reverse) std::reverse(sorted.begin(), sorted.end());
  ClampRanks(static_cast<int64_t>(sorted.size()), &start, &stop);
  std::vector<Reply> out;
  for (int64_t i = start; i <= stop; ++i) out.push_back(Reply::String(sorted[static_cast<size_t>(i)].second));
  return Reply::Array(std::move(out));
}
Reply ZRange(Keyspace& keys, const Argv& a) { return ZRangeAny(keys, a, false); }
Reply ZRevRange(Keyspace& keys, const Argv& a) { return ZRangeAny(keys, a, true); }

Reply ZRemRangeByRank(Keyspace& keys, const Argv& a) {
  int64_t start = 0, stop = 0;
  if (a.size() != 4 || !ToInt(a[2], &start) || !ToInt(a[3], &stop)) return WrongArgs("zremrangebyrank");
  Reply wrong;
  Value* v = keys.FindTyped(a[1], Type::kZset, &wrong);
  if (wrong.is_error()) return wrong;
  if (v == nullptr) return Reply::Integer(0);
  std::vector<std::pair<double, std::string>> sorted = ByRank(v);
  ClampRanks(static_cast<int64_t>(sorted.size()), &start, &stop);
  int64_t removed = 0;
  for (int64_t i = start; i <= stop; ++i) removed += static_cast<int64_t>(v->zset.erase(sorted[static_cast<size_t>(i)].second));
  if (v->zset.empty()) keys.Erase(a[1]);
  return Reply::Integer(removed);
}

// ---- streams --------------------------------------------------------------------------------

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

Reply EntryReply(const StreamEntry& e) {
  std::vector<Reply> fields;
  for (const std::string& f : e.fields) fields.push_back(Reply::String(f));
  return Reply::Array({Reply::String(e.Id()), Reply::Array(std::move(fields))});
}

Reply XLen(Keyspace& keys, const Argv& a) {
  return CountOf(keys, a, "xlen", Type::kStream, [](const Value& v) { return v.stream.size(); });
}

// XADD key [MAXLEN [~|=] n] * field value [field value ...]
Reply XAdd(Keyspace& keys, const Argv& a) {
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
  Value* v = keys.FindTyped(a[1], Type::kStream, &wrong);
  if (wrong.is_error()) return wrong;
  if (v == nullptr) v = &keys.Create(a[1], Type::kStream);
  StreamEntry e;
  const uint64_t now = static_cast<uint64_t>(std::max<int64_t>(keys.unix_ms, 0));
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

Reply XRangeAny(Keyspace& keys, const Argv& a, bool reverse) {
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
  Value* v = keys.FindTyped(a[1], Type::kStream, &wrong);
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
Reply XRange(Keyspace& keys, const Argv& a) { return XRangeAny(keys, a, false); }
Reply XRevRange(Keyspace& keys, const Argv& a) { return XRangeAny(keys, a, true); }

}  // namespace

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool ToInt(const std::string& s, int64_t* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

Value* Keyspace::Find(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return nullptr;
  if (it->second.expires_unix_ms != 0 && it->second.expires_unix_ms <= unix_ms) {
    data_.erase(it);
    return nullptr;
  }
  return &it->second;
}

Value* Keyspace::FindTyped(const std::string& key, Type type, Reply* wrongtype) {
  Value* v = Find(key);
  if (v != nullptr && v->type != type) {
    *wrongtype = Err("WRONGTYPE Operation against a key holding the wrong kind of value");
    return nullptr;
  }
  return v;
}

Value& Keyspace::Create(const std::string& key, Type type) {
  Value& v = data_[key];
  v = Value{};
  v.type = type;
  return v;
}

Handler FindHandler(const std::string& upper_name) {
  static const std::map<std::string, Handler> kHandlers = {
      {"PING", Ping},       {"GET", Get},         {"STRLEN", StrLen},     {"SET", Set},
      {"DEL", Del},         {"EXISTS", Exists},   {"PEXPIRE", PExpire},   {"INCR", Incr},
      {"HSET", HSet},       {"HSETNX", HSetNx},   {"HGET", HGet},         {"HDEL", HDel},
      {"HGETALL", HGetAll}, {"HMGET", HMGet},     {"HSCAN", HScan},       {"HLEN", HLen},
      {"SADD", SAdd},       {"SREM", SRem},       {"SMEMBERS", SMembers}, {"SCARD", SCard},
      {"ZADD", ZAdd},       {"ZREM", ZRem},       {"ZSCORE", ZScore},     {"ZRANGE", ZRange},
      {"ZREVRANGE", ZRevRange}, {"ZREMRANGEBYRANK", ZRemRangeByRank},
      {"XLEN", XLen},       {"XADD", XAdd},       {"XRANGE", XRange},     {"XREVRANGE", XRevRange},
  };
  auto it = kHandlers.find(upper_name);
  return it == kHandlers.end() ? nullptr : it->second;
}

}  // namespace ft::redis::fake

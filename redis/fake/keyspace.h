// The fake Redis's data (fake_store.h's FakeRedis holds one) and its commands, one handler per
// command in a table by name. Internal to redis/fake/; not thread-safe, as FakeRedis.
#ifndef FT_REDIS_FAKE_KEYSPACE_H_
#define FT_REDIS_FAKE_KEYSPACE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "redis/reply.h"
#include "redis/store.h"

namespace ft::redis::fake {

struct StreamEntry {
  uint64_t ms = 0;
  uint64_t seq = 0;
  Argv fields;
  std::string Id() const { return std::to_string(ms) + "-" + std::to_string(seq); }
};

enum class Type { kString, kHash, kSet, kStream, kZset };

struct Value {
  Type type = Type::kString;
  std::string str;
  std::map<std::string, std::string> hash;
  std::set<std::string> set;
  std::map<std::string, double> zset;  // member -> score
  std::vector<StreamEntry> stream;
  uint64_t last_ms = 0, last_seq = 0;
  int64_t expires_unix_ms = 0;  // 0: never
};

// The keys on the server's clock (unix ms, set by the test): a key past its expiry is gone.
class Keyspace {
 public:
  Value* Find(const std::string& key);  // nullptr when absent or expired
  // nullptr when absent; a key of another type sets *wrongtype to Redis's WRONGTYPE error.
  Value* FindTyped(const std::string& key, Type type, Reply* wrongtype);
  Value& Create(const std::string& key, Type type);  // replaces whatever the key held
  void Erase(const std::string& key) { data_.erase(key); }
  void Clear() { data_.clear(); }

  int64_t unix_ms = 1'700'000'000'000;

 private:
  std::map<std::string, Value> data_;
};

// One command on the keyspace, its arguments as sent (argv[0] the name in any case).
using Handler = Reply (*)(Keyspace& keys, const Argv& argv);
// The handler of an upper-case command name; nullptr for a command the fake does not speak.
Handler FindHandler(const std::string& upper_name);

std::string Upper(std::string s);
bool ToInt(const std::string& s, int64_t* out);

}  // namespace ft::redis::fake

#endif  // FT_REDIS_FAKE_KEYSPACE_H_

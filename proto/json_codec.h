// The machinery behind proto/codec.h and proto/master_codec.h: encoding with nlohmann (ordered,
// "v" first, never failing) and decoding with simdjson's DOM (field paths named only when a
// check fails, size and nesting limits, "v" checked first). Private to proto/: no header
// outside this folder includes it (nlohmann and simdjson stay out of ft's interfaces).
#ifndef FT_PROTO_JSON_CODEC_H_
#define FT_PROTO_JSON_CODEC_H_

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <exception>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/status.h"
#include "proto/codec.h"
#include "proto/messages.h"

namespace ft::proto::json {

// Encoding keeps insertion order so "v" comes first and a person reading redis-cli sees the
// identifying fields before the long lists.
using OJson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Encoding

// JSON has no NaN or infinity (nlohmann would write null, which our own reader rejects).
inline double Finite(double v) {
  if (std::isnan(v)) return 0;
  if (std::isinf(v)) return v > 0 ? DBL_MAX : -DBL_MAX;
  return v;
}

inline std::string Dump(const OJson& j) {
  // Invalid UTF-8 in a string (a node name from a strange environment) becomes U+FFFD instead
  // of an exception: encoding never fails.
  return j.dump(-1, ' ', false, OJson::error_handler_t::replace);
}

inline OJson Versioned() {
  OJson j = OJson::object();
  j["v"] = kSchemaVersion;
  return j;
}

// ---------------------------------------------------------------------------------------------
// Decoding, with simdjson's DOM: a master reads the progress tables of every rank of a job in
// one round (16k ranks: ~15 MB of JSON), which nlohmann parses at ~90 MB/s and simdjson at
// over 1 GB/s. Every check names the field by its path ("progress.comms[2].entered"); the path
// is only spelled out when a check fails.

using Elem = simdjson::dom::element;
using simdjson::dom::element_type;

inline const char* TypeName(Elem j) {
  switch (j.type()) {
    case element_type::NULL_VALUE: return "null";
    case element_type::OBJECT: return "an object";
    case element_type::ARRAY: return "an array";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::INT64:
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a fractional number";
  }
  return "something else";
}

// Where a value sits: a chain of keys and list indexes through the caller's stack frames
// (each link lives as long as the call that reads below it).
struct FieldPath {
  static constexpr size_t kNoIndex = ~size_t{0};
  const FieldPath* parent = nullptr;
  std::string_view key;
  size_t index = kNoIndex;

  std::string Str() const {
    std::string out = parent != nullptr ? parent->Str() : std::string();
    if (index != kNoIndex) {
      out += "[" + std::to_string(index) + "]";
    } else if (!key.empty()) {
      if (!out.empty()) out += '.';
      out += key;
    }
    return out;
  }
};

inline Status Expected(const FieldPath& path, const char* what, Elem got) {
  return Status::Corrupt(path.Str() + ": expected " + what + ", got " + TypeName(got));
}

template <typename T>
constexpr int64_t LowOf() {
  return std::is_signed_v<T> ? static_cast<int64_t>(std::numeric_limits<T>::min()) : 0;
}
template <typename T>
constexpr uint64_t HighOf() {
  return static_cast<uint64_t>(std::numeric_limits<T>::max());
}

template <typename T>
Status CheckInt(Elem j, const FieldPath& path, T* out, int64_t lo = LowOf<T>(), uint64_t hi = HighOf<T>()) {
  auto range = [&](const std::string& got) {
    if (lo >= 0 && !got.empty() && got[0] == '-') {
      return Status::Corrupt(path.Str() + ": must not be negative, got " + got);
    }
    return Status::Corrupt(path.Str() + ": " + got + " is out of range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
  };
  if (j.type() == element_type::UINT64) {
    uint64_t u = j.get_uint64().value_unsafe();
    if (u > hi || (lo > 0 && u < static_cast<uint64_t>(lo))) return range(std::to_string(u));
    *out = static_cast<T>(u);
  } else if (j.type() == element_type::INT64) {
    int64_t v = j.get_int64().value_unsafe();
    if (v < lo || (v >= 0 && static_cast<uint64_t>(v) > hi)) return range(std::to_string(v));
    *out = static_cast<T>(v);
  } else {
    return Expected(path, "an integer", j);
  }
  return Status::Ok();
}

inline Status CheckNum(Elem j, const FieldPath& path, double* out, double lo = -DBL_MAX, double hi = DBL_MAX) {
  double v;
  switch (j.type()) {
    case element_type::DOUBLE: v = j.get_double().value_unsafe(); break;
    case element_type::INT64: v = static_cast<double>(j.get_int64().value_unsafe()); break;
    case element_type::UINT64: v = static_cast<double>(j.get_uint64().value_unsafe()); break;
    default: return Expected(path, "a number", j);
  }
  if (!std::isfinite(v)) return Status::Corrupt(path.Str() + ": not a finite number");
  if (v < lo || v > hi) {
    return Status::Corrupt(path.Str() + ": " + std::to_string(v) + " is out of range [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v;
  return Status::Ok();
}

inline Status CheckBool(Elem j, const FieldPath& path, bool* out) {
  if (j.type() != element_type::BOOL) return Expected(path, "a boolean", j);
  *out = j.get_bool().value_unsafe();
  return Status::Ok();
}

enum class Empty { kAllowed, kRejected };

inline Status CheckStr(Elem j, const FieldPath& path, std::string* out, Empty empty = Empty::kAllowed) {
  if (j.type() != element_type::STRING) return Expected(path, "a string", j);
  std::string_view s = j.get_string().value_unsafe();
  if (s.size() > kMaxStringBytes) {
    return Status::Corrupt(path.Str() + ": string of " + std::to_string(s.size()) +
                           " bytes, more than the limit of " + std::to_string(kMaxStringBytes));
  }
  if (empty == Empty::kRejected && s.empty()) return Status::Corrupt(path.Str() + ": must not be empty");
  out->assign(s);
  return Status::Ok();
}

inline Status CheckHex(Elem j, const FieldPath& path, uint64_t* out) {
  if (j.type() != element_type::STRING) return Expected(path, "a communicator id string (16 hex digits)", j);
  if (!ParseCommIdHex(j.get_string().value_unsafe(), out)) {
    return Status::Corrupt(path.Str() + ": expected 16 hex digits");
  }
  return Status::Ok();
}

enum class Need { kOptional, kRequired };

// The fields of one JSON object at `path` (the top, "progress", "comms[3]").
class Reader {
 public:
  Reader(simdjson::dom::object obj, FieldPath path) : obj_(obj), path_(path) {}

  std::string Path(std::string_view key) const { return At(key).Str(); }

  // *found is false when the field is absent and optional.
  Status Find(const char* key, Need need, Elem* found, bool* present) const {
    auto field = obj_.at_key(key);
    *present = field.error() == simdjson::SUCCESS;
    if (*present) {
      *found = field.value_unsafe();
    } else if (need == Need::kRequired) {
      return Status::Corrupt(Path(key) + ": missing (required)");
    }
    return Status::Ok();
  }

  template <typename T>
  Status Int(const char* key, Need need, T* out, int64_t lo = LowOf<T>(), uint64_t hi = HighOf<T>()) const {
    Elem j;
    bool present;
    FT_RETURN_IF_ERROR(Find(key, need, &j, &present));
    return present ? CheckInt(j, At(key), out, lo, hi) : Status::Ok();
  }
  Status Num(const char* key, Need need, double* out, double lo = -DBL_MAX, double hi = DBL_MAX) const {
    Elem j;
    bool present;
    FT_RETURN_IF_ERROR(Find(key, need, &j, &present));
    return present ? CheckNum(j, At(key), out, lo, hi) : Status::Ok();
  }
  Status Bool(const char* key, Need need, bool* out) const {
    Elem j;
    bool present;
    FT_RETURN_IF_ERROR(Find(key, need, &j, &present));
    return present ? CheckBool(j, At(key), out) : Status::Ok();
  }
  Status Str(const char* key, Need need, std::string* out, Empty empty = Empty::kAllowed) const {
    Elem j;
    bool present;
    FT_RETURN_IF_ERROR(Find(key, need, &j, &present));
    return present ? CheckStr(j, At(key), out, empty) : Status::Ok();
  }
  Status Hex(const char* key, Need need, uint64_t* out) const {
    Elem j;
    bool present;
    FT_RETURN_IF_ERROR(Find(key, need, &j, &present));
    return present ? CheckHex(j, At(key), out) : Status::Ok();
  }

  // A nested object: `fill(Reader)` reads its fields.
  template <typename Fill>
  Status Object(const char* key, Need need, Fill fill) const {
    Elem j;
    bool present;
    FT_RETURN_IF_ERROR(Find(key, need, &j, &present));
    if (!present) return Status::Ok();
    const FieldPath here = At(key);
    if (j.type() != element_type::OBJECT) return Expected(here, "an object", j);
    return fill(Reader(j.get_object().value_unsafe(), here));
  }

  // A list: `entry(Elem, const FieldPath&, T*)` checks one entry.
  template <typename T, typename Entry>
  Status List(const char* key, Need need, std::vector<T>* out, Entry entry) const {
    Elem j;
    bool present;
    FT_RETURN_IF_ERROR(Find(key, need, &j, &present));
    if (!present) return Status::Ok();
    const FieldPath list = At(key);
    if (j.type() != element_type::ARRAY) return Expected(list, "a list", j);
    simdjson::dom::array array = j.get_array().value_unsafe();
    const size_t n = array.size();
    if (n > kMaxListEntries) {
      return Status::Corrupt(list.Str() + ": " + std::to_string(n) + " entries, more than the limit of " +
                             std::to_string(kMaxListEntries));
    }
    std::vector<T> values(n);
    size_t i = 0;
    for (Elem e : array) {
      const FieldPath item{&list, {}, i};
      FT_RETURN_IF_ERROR(entry(e, item, &values[i]));
      ++i;
    }
    *out = std::move(values);
    return Status::Ok();
  }

  // A list of objects: `fill(Reader, T*)` reads one entry's fields.
  template <typename T, typename Fill>
  Status Objects(const char* key, Need need, std::vector<T>* out, Fill fill) const {
    return List(key, need, out, [&](Elem e, const FieldPath& path, T* value) -> Status {
      if (e.type() != element_type::OBJECT) return Expected(path, "an object", e);
      return fill(Reader(e.get_object().value_unsafe(), path), value);
    });
  }

 private:
  FieldPath At(std::string_view key) const { return {&path_, key, FieldPath::kNoIndex}; }

  simdjson::dom::object obj_;
  FieldPath path_;
};

// "<where>: unknown <what> '<name>' (<the names of known>)": a name of one of proto/'s
// vocabularies (an enum with its XName and ParseX) that this build does not know, or that this
// value may not hold (`known` a part of the vocabulary).
template <typename E>
Status UnknownName(const std::string& where, const char* what, std::string_view name,
                   std::type_identity_t<std::span<const E>> known, const char* (*name_of)(E)) {
  std::string names;
  for (E e : known) names += (names.empty() ? "" : ", ") + std::string(name_of(e));
  return Status::Corrupt(where + ": unknown " + what + " '" + std::string(name.substr(0, 16)) + "' (" + names +
                         ")");
}

// A required field holding a vocabulary's name: read by `parse`, and one of `known`; refused by
// name otherwise (UnknownName), an empty one as empty.
template <typename E>
Status ReadName(const Reader& r, const char* key, const char* what, std::optional<E> (*parse)(std::string_view),
                std::type_identity_t<std::span<const E>> known, const char* (*name_of)(E), E* out) {
  std::string name;
  FT_RETURN_IF_ERROR(r.Str(key, Need::kRequired, &name, Empty::kRejected));
  const std::optional<E> value = parse(name);
  if (!value.has_value() || std::find(std::begin(known), std::end(known), *value) == std::end(known)) {
    return UnknownName<E>(r.Path(key), what, name, known, name_of);
  }
  *out = *value;
  return Status::Ok();
}


// Brackets and braces outside strings: the parser keeps its own stack, but a bound on nesting
// keeps memory and time proportional to what a real value needs.
inline Status CheckNesting(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting) {
        return Status::Corrupt("nested deeper than " + std::to_string(kMaxNesting) + " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::Ok();
}

// Parses `text`, checks "v", reads the fields with `fill` into a fresh T and only then stores
// it in *out. Never throws. One parser per thread: its buffers are reused from value to value
// (the parsed document lives only until this thread's next decode).
template <typename T, typename Fill>
Status DecodeValue(std::string_view text, T* out, Fill fill) {
  try {
    if (text.size() > kMaxValueBytes) {
      return Status::Corrupt("value of " + std::to_string(text.size()) +
                             " bytes, more than the limit of " + std::to_string(kMaxValueBytes));
    }
    FT_RETURN_IF_ERROR(CheckNesting(text));
    thread_local simdjson::dom::parser parser;
    auto parsed = parser.parse(text.data(), text.size());
    if (parsed.error() != simdjson::SUCCESS) {
      return Status::Corrupt(std::string("not JSON: ") + simdjson::error_message(parsed.error()));
    }
    Elem j = parsed.value_unsafe();
    const FieldPath top;
    if (j.type() != element_type::OBJECT) return Status::Corrupt(std::string("value: expected a JSON object, got ") + TypeName(j));
    Reader r(j.get_object().value_unsafe(), top);
    Elem v;
    bool present;
    FT_RETURN_IF_ERROR(r.Find("v", Need::kRequired, &v, &present));
    const bool is_int = v.type() == element_type::INT64 || v.type() == element_type::UINT64;
    if (!is_int) return Status::Corrupt(std::string("v: expected an integer (the schema version), got ") + TypeName(v));
    const bool ours = v.type() == element_type::INT64 ? v.get_int64().value_unsafe() == kSchemaVersion
                                                      : v.get_uint64().value_unsafe() == static_cast<uint64_t>(kSchemaVersion);
    if (!ours) {
      std::string got = v.type() == element_type::INT64 ? std::to_string(v.get_int64().value_unsafe())
                                                        : std::to_string(v.get_uint64().value_unsafe());
      return Status::Unsupported("schema version " + got + ", this build reads version " +
                                 std::to_string(kSchemaVersion) +
                                 "; run the same ft version on workers and master");
    }
    T value{};
    FT_RETURN_IF_ERROR(fill(r, &value));
    *out = std::move(value);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Corrupt(std::string("undecodable value: ") + e.what());
  } catch (...) {
    return Status::Corrupt("undecodable value");
  }
}

}  // namespace ft::proto::json

#endif  // FT_PROTO_JSON_CODEC_H_

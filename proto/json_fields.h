// One list of a struct's fields drives both its encoding and its decoding: a codec writes the
// list once, as a generic lambda over the direction (c: a const CommRow to encode, a CommRow
// to decode),
//
//   const auto kCommRowFields = [](auto& io, auto& c) {
//     io.Hex("comm", c.comm_id, Need::kRequired);
//     io.Int("comm_rank", c.comm_rank, Need::kOptional, -1);
//     io.If(c.bytes != 0).Int("bytes", c.bytes, Need::kOptional);  // written only when set
//   };
//
// and calls it with a FieldWriter (fields in the list's order, "v" first where the caller put
// it; a field under If(false) is not written) or a FieldReader (each field checked by
// json_codec.h's Reader, its bounds and its need; the first failure is the result; If does not
// apply: a field present is always read). When(false) leaves the next field out both ways: a
// field that exists only in some values, as an earlier field says (a settling plan's "why").
// A new field is one line, read and written alike.
// Private to proto/, as json_codec.h.
#ifndef FT_PROTO_JSON_FIELDS_H_
#define FT_PROTO_JSON_FIELDS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/status.h"
#include "proto/json_codec.h"

namespace ft::proto::json {

class FieldWriter {
 public:
  explicit FieldWriter(OJson* j) : j_(j) {}

  // Whether the next field is written (a field of some kinds only, or only when set).
  FieldWriter& If(bool write) {
    write_next_ = write;
    return *this;
  }
  // Whether the next field is in the value at all (read only then too).
  FieldWriter& When(bool in_value) { return If(in_value); }

  template <typename T>
  void Int(const char* key, const T& v, Need, int64_t = 0, uint64_t = 0) { Put(key, v); }
  void Num(const char* key, const double& v, Need, double = 0, double = 0) { Put(key, Finite(v)); }
  void Bool(const char* key, const bool& v, Need) { Put(key, v); }
  void Str(const char* key, const std::string& v, Need, Empty = Empty::kAllowed) { Put(key, v); }
  void Hex(const char* key, const uint64_t& v, Need) { Put(key, CommIdHex(v)); }

  // A vocabulary's name (json_codec.h's ReadName: required, one of `known`).
  template <typename E>
  void Name(const char* key, const E& v, const char*, std::optional<E> (*)(std::string_view),
            std::type_identity_t<std::span<const E>>, const char* (*name_of)(E)) {
    Put(key, name_of(v));
  }

  // Lists of plain values, each entry checked as the field alone would be.
  template <typename T>
  void Ints(const char* key, const std::vector<T>& v, Need, int64_t = 0, uint64_t = 0) { Put(key, v); }
  void Strs(const char* key, const std::vector<std::string>& v, Need, Empty = Empty::kAllowed) { Put(key, v); }

  // A field spelled its own way: write(v) gives its JSON; read(Reader, key, need, T*) is the
  // FieldReader's half.
  template <typename T, typename Write, typename Read>
  void Custom(const char* key, const T& v, Need, Write write, Read) { Put(key, write(v)); }

  // A nested object, its fields listed by fields(io, value).
  template <typename T, typename Fields>
  void Object(const char* key, const T& v, Need, Fields fields) {
    if (!TakeWrite()) return;
    OJson o = OJson::object();
    FieldWriter w(&o);
    fields(w, v);
    (*j_)[key] = std::move(o);
  }
  // One that may be absent: written only when there is one.
  template <typename T, typename Fields>
  void Object(const char* key, const std::optional<T>& v, Need need, Fields fields) {
    if (v.has_value()) {
      Object(key, *v, need, fields);
    } else {
      TakeWrite();
    }
  }

  // A list of objects, each one's fields listed by fields(io, entry).
  template <typename T, typename Fields>
  void Objects(const char* key, const std::vector<T>& v, Need, Fields fields) {
    if (!TakeWrite()) return;
    OJson list = OJson::array();
    for (const T& entry : v) {
      OJson o = OJson::object();
      FieldWriter w(&o);
      fields(w, entry);
      list.push_back(std::move(o));
    }
    (*j_)[key] = std::move(list);
  }

 private:
  bool TakeWrite() {
    const bool write = write_next_;
    write_next_ = true;
    return write;
  }
  template <typename V>
  void Put(const char* key, V&& v) {
    if (TakeWrite()) (*j_)[key] = std::forward<V>(v);
  }

  OJson* j_;
  bool write_next_ = true;
};

class FieldReader {
 public:
  explicit FieldReader(const Reader& r) : r_(r) {}

  FieldReader& If(bool) { return *this; }  // a field present is read whatever the writer's rule
  FieldReader& When(bool in_value) {
    read_next_ = in_value;
    return *this;
  }

  template <typename T>
  void Int(const char* key, T& v, Need need, int64_t lo = LowOf<T>(), uint64_t hi = HighOf<T>()) {
    if (Go()) status_ = r_.Int(key, need, &v, lo, hi);
  }
  void Num(const char* key, double& v, Need need, double lo = -DBL_MAX, double hi = DBL_MAX) {
    if (Go()) status_ = r_.Num(key, need, &v, lo, hi);
  }
  void Bool(const char* key, bool& v, Need need) {
    if (Go()) status_ = r_.Bool(key, need, &v);
  }
  void Str(const char* key, std::string& v, Need need, Empty empty = Empty::kAllowed) {
    if (Go()) status_ = r_.Str(key, need, &v, empty);
  }
  void Hex(const char* key, uint64_t& v, Need need) {
    if (Go()) status_ = r_.Hex(key, need, &v);
  }
  template <typename E>
  void Name(const char* key, E& v, const char* what, std::optional<E> (*parse)(std::string_view),
            std::type_identity_t<std::span<const E>> known, const char* (*name_of)(E)) {
    if (Go()) status_ = ReadName<E>(r_, key, what, parse, known, name_of, &v);
  }
  template <typename T>
  void Ints(const char* key, std::vector<T>& v, Need need, int64_t lo = LowOf<T>(), uint64_t hi = HighOf<T>()) {
    if (!Go()) return;
    status_ = r_.List(key, need, &v, [lo, hi](Elem e, const FieldPath& path, T* i) { return CheckInt(e, path, i, lo, hi); });
  }
  void Strs(const char* key, std::vector<std::string>& v, Need need, Empty empty = Empty::kAllowed) {
    if (!Go()) return;
    status_ = r_.List(key, need, &v, [empty](Elem e, const FieldPath& path, std::string* s) { return CheckStr(e, path, s, empty); });
  }
  template <typename T, typename Write, typename Read>
  void Custom(const char* key, T& v, Need need, Write, Read read) {
    if (Go()) status_ = read(r_, key, need, &v);
  }
  template <typename T, typename Fields>
  void Object(const char* key, T& v, Need need, Fields fields) {
    if (!Go()) return;
    status_ = r_.Object(key, need, [&](const Reader& r) { return Read(r, v, fields); });
  }
  template <typename T, typename Fields>
  void Object(const char* key, std::optional<T>& v, Need need, Fields fields) {
    if (!Go()) return;
    status_ = r_.Object(key, need, [&](const Reader& r) { return Read(r, v.emplace(), fields); });
  }
  template <typename T, typename Fields>
  void Objects(const char* key, std::vector<T>& v, Need need, Fields fields) {
    if (!Go()) return;
    status_ = r_.Objects(key, need, &v, [&](const Reader& r, T* entry) { return Read(r, *entry, fields); });
  }

  const Status& status() const { return status_; }

  // The fields of `v` read from `r` by its list.
  template <typename T, typename Fields>
  static Status Read(const Reader& r, T& v, Fields fields) {
    FieldReader io(r);
    fields(io, v);
    return io.status();
  }

 private:
  // Whether the next field is read: none after a failure, nor one under When(false).
  bool Go() {
    const bool read = read_next_ && status_.ok();
    read_next_ = true;
    return read;
  }

  const Reader& r_;
  Status status_;
  bool read_next_ = true;
};

// A string field a Custom reader checks: written as it is.
inline OJson AsIs(const std::string& s) { return s; }
// A list of strings a Custom reader checks entry by entry: written as it is.
inline OJson StringsAsIs(const std::vector<std::string>& list) { return list; }

// A struct's fields written into `j` by its list (after what `j` already holds: "v").
template <typename T, typename Fields>
void WriteFields(const T& v, Fields fields, OJson* j) {
  FieldWriter w(j);
  fields(w, v);
}

// A value whose JSON is "v" and its field list: its encoding, and its decoding (DecodeValue) when
// the list is all there is to check.
template <typename T, typename Fields>
std::string EncodeFields(const T& v, Fields fields) {
  OJson j = Versioned();
  WriteFields(v, fields, &j);
  return Dump(j);
}
template <typename T, typename Fields>
Status DecodeFields(std::string_view text, T* out, Fields fields) {
  return DecodeValue(text, out, [fields](const Reader& r, T* v) { return FieldReader::Read(r, *v, fields); });
}

}  // namespace ft::proto::json

#endif  // FT_PROTO_JSON_FIELDS_H_

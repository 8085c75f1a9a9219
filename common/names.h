// ft's vocabularies: each enum that is written as a word (in a log line, a Redis value, a metric
// label, a flag) has one table of its values and their names, read both ways from it. A switch
// per direction wrote every value twice more, once per direction, in every vocabulary of the
// project; the table is the list, the spelling and the parser at once.
//
//   inline constexpr Named<Dim> kDimNames[] = {{Dim::kTp, "tp"}, {Dim::kDp, "dp"}, ...};
//   NameIn(kDimNames, Dim::kTp) == "tp";  ParseIn(kDimNames, "dp") == Dim::kDp;
//   for (Dim d : ValuesIn(kDimNames)) ...   // every value, in the table's order
//
// A value added to an enum and not to its table names itself "?" and parses from nothing, as a
// switch's default did; a table that names a value twice or gives two values one name does not
// compile (ValuesIn, or the table's static_assert(NamesAreUnique(...)) where nothing lists it).
// Header-only and constexpr: usable in shared-memory formats and static_asserts.
#ifndef FT_COMMON_NAMES_H_
#define FT_COMMON_NAMES_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace ft {

template <typename E>
struct Named {
  E value;
  const char* name;
};

// The name of `value`, or `unknown` for one the table lacks (only a cast, or a newer build's
// byte read from foreign memory, makes one).
template <typename E, size_t N>
constexpr const char* NameIn(const Named<E> (&table)[N], E value, const char* unknown = "?") {
  for (const Named<E>& e : table) {
    if (e.value == value) return e.name;
  }
  return unknown;
}

// The value named `name`, exactly (case and all); none for an unknown or empty name.
template <typename E, size_t N>
constexpr std::optional<E> ParseIn(const Named<E> (&table)[N], std::string_view name) {
  for (const Named<E>& e : table) {
    if (name == e.name) return e.value;
  }
  return std::nullopt;
}

// Whether no value and no name stands twice in the table.
template <typename E, size_t N>
constexpr bool NamesAreUnique(const Named<E> (&table)[N]) {
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = i + 1; j < N; ++j) {
      if (table[i].value == table[j].value || std::string_view(table[i].name) == table[j].name) return false;
    }
  }
  return true;
}

// Every value of the table, in its order; a table that is not unique does not compile here
// (the list a vocabulary's users iterate: `inline constexpr auto kDims = ValuesIn(kDimNames);`).
template <typename E, size_t N>
consteval std::array<E, N> ValuesIn(const Named<E> (&table)[N]) {
  if (!NamesAreUnique(table)) throw "a vocabulary's table holds a value or a name twice";
  std::array<E, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = table[i].value;
  return out;
}

}  // namespace ft

#endif  // FT_COMMON_NAMES_H_

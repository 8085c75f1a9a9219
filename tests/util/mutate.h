// The one mutator behind every parser's fuzz target (tests/fuzz): small, deterministic edits of
// a valid encoding — the inputs that reach a parser's deep checks, which random bytes never do.
// libFuzzer brings its own mutations when a target is built as a fuzzer (make fuzz); this one
// drives the same targets in the corpus replayer every `make test` runs, so a seed reproduces a
// failure on any machine.
//
// A format tunes it with MutateOptions: where its counts and lengths live (the hot prefix gets
// half the byte edits), the tokens its grammar is made of (JSON's brackets and extreme numbers,
// a plan file's separators), and a fix-up that keeps what the parser checks first honest (a
// trailing checksum resealed, a frame's length field rewritten) so the checks behind it are
// reached. Not thread-safe: one Mutator per thread.
#ifndef FT_TESTS_UTIL_MUTATE_H_
#define FT_TESTS_UTIL_MUTATE_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace ft::test_util {

struct MutateOptions {
  size_t hot_prefix = 0;                // bytes at the start that get half the byte edits; 0: none
  std::vector<std::string> tokens;      // inserted or written over the input; empty: bytes only
  int max_edits = 4;                    // 1..max_edits edits per mutation
  // Applied after the edits with probability fixup_per_8 / 8 (a checksum resealed, a length
  // rewritten); null: none.
  std::function<void(std::string*)> fixup;
  int fixup_per_8 = 7;
};

class Mutator {
 public:
  explicit Mutator(uint64_t seed, MutateOptions options = {}) : rng_(seed), options_(std::move(options)) {}

  // One mutation of `valid`: 1..max_edits edits, then the fix-up.
  std::string Mutate(std::string_view valid) {
    std::string s(valid);
    const int edits = 1 + static_cast<int>(Below(static_cast<uint64_t>(options_.max_edits > 0 ? options_.max_edits : 1)));
    for (int e = 0; e < edits; ++e) Edit(&s);
    if (options_.fixup && Below(8) < static_cast<uint64_t>(options_.fixup_per_8)) options_.fixup(&s);
    return s;
  }

  // Random bytes, up to `max_bytes`, sometimes behind `valid_start` (a magic, a version line),
  // so the checks after it are reached.
  std::string RandomBytes(size_t max_bytes, std::string_view valid_start = {}) {
    std::string s = !valid_start.empty() && Below(2) == 0 ? std::string(valid_start) : std::string();
    const size_t n = static_cast<size_t>(Below(max_bytes + 1));
    for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(rng_() & 0xff));
    if (options_.fixup && Below(2) == 0) options_.fixup(&s);
    return s;
  }

  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  std::mt19937_64& rng() { return rng_; }

 private:
  // Where a byte edit lands: half of them in the hot prefix when the format has one.
  size_t Position(const std::string& s) {
    if (s.empty()) return 0;
    if (options_.hot_prefix > 0 && Below(2) == 0) return static_cast<size_t>(Below(std::min(options_.hot_prefix, s.size())));
    return static_cast<size_t>(Below(s.size()));
  }

  std::string Token() {
    if (options_.tokens.empty() || Below(3) == 0) {
      std::string t(1 + Below(8), '\0');
      for (char& c : t) c = static_cast<char>(rng_() & 0xff);
      return t;
    }
    return options_.tokens[static_cast<size_t>(Below(options_.tokens.size()))];
  }

  void Edit(std::string* s) {
    switch (Below(9)) {
      case 0:  // a random byte
        if (!s->empty()) (*s)[Position(*s)] = static_cast<char>(rng_() & 0xff);
        break;
      case 1:  // a bit flip
        if (!s->empty()) (*s)[Position(*s)] ^= static_cast<char>(1u << Below(8));
        break;
      case 2: {  // a boundary value in a 4- or 8-byte word (counts, lengths, offsets)
        const size_t width = Below(2) == 0 ? 4 : 8;
        if (s->size() < width) break;
        static constexpr uint64_t kBoundaries[] = {0, 1, 0x7f, 0xff, 0x7fffffff, 0x80000000, 0xffffffff,
                                                   0x7fffffffffffffffull, ~0ull};
        uint64_t v = Below(4) == 0 ? Below(300) : kBoundaries[Below(sizeof(kBoundaries) / sizeof(kBoundaries[0]))];
        const size_t at = std::min(Position(*s), s->size() - width);
        std::memcpy(s->data() + at, &v, width);  // little-endian: the low bytes of v
        break;
      }
      case 3:  // truncate
        s->resize(static_cast<size_t>(Below(s->size() + 1)));
        break;
      case 4:  // append
        s->append(Token());
        break;
      case 5: {  // insert a token
        const size_t at = static_cast<size_t>(Below(s->size() + 1));
        s->insert(at, Token());
        break;
      }
      case 6: {  // overwrite with a token
        if (s->empty()) break;
        const std::string t = Token();
        const size_t at = Position(*s);
        s->replace(at, std::min(t.size(), s->size() - at), t);
        break;
      }
      case 7: {  // delete a run
        if (s->empty()) break;
        s->erase(static_cast<size_t>(Below(s->size())), 1 + static_cast<size_t>(Below(16)));
        break;
      }
      default: {  // duplicate a run somewhere else
        if (s->empty()) break;
        const size_t at = static_cast<size_t>(Below(s->size()));
        const std::string run = s->substr(at, 1 + static_cast<size_t>(Below(32)));
        s->insert(static_cast<size_t>(Below(s->size() + 1)), run);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  MutateOptions options_;
};

// The tokens of JSON values, with the numbers decoders get wrong.
inline std::vector<std::string> JsonTokens() {
  return {"{", "}", "[", "]", "\"", ",", ":", "-", ".", "e", "E", "\\", "\\u0000", "null", "true", "false",
          "-1", "1e308", "1e999", "-0", "0.5", "18446744073709551616", "9223372036854775808",
          "-9223372036854775809", std::string(1, '\0'), "\xff"};
}

}  // namespace ft::test_util

#endif  // FT_TESTS_UTIL_MUTATE_H_

// Pins the hashes whose values cross process and build boundaries (communicator ids, API symbol
// ids): a changed constant would split one communicator into several or rename errors.
#include "common/hash.h"

#include <gtest/gtest.h>

#include <cstring>

namespace ft {
namespace {

TEST(HashTest, Fnv1a64KnownValues) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
  static_assert(Fnv1a64("cudaMalloc") == 0x0022810a8c886b42ull, "usable at compile time");
}

TEST(HashTest, BytesMatchText) {
  const char text[] = "ncclAllReduce";
  EXPECT_EQ(Fnv1a64Bytes(text, std::strlen(text)), Fnv1a64(text));
  // Continuing from a previous hash is hashing the concatenation.
  EXPECT_EQ(Fnv1a64("bar", Fnv1a64("foo")), Fnv1a64("foobar"));
  EXPECT_EQ(Fnv1a64Bytes("bar", 3, Fnv1a64Bytes("foo", 3)), Fnv1a64("foobar"));
}

TEST(HashTest, SplitMixKnownValues) {
  EXPECT_EQ(Mix64(0), 0u);
  EXPECT_EQ(Mix64(1), 0x5692161d100b05e5ull);
  // The first output of splitmix64 seeded with 0 (Vigna's reference implementation).
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafull);
}

}  // namespace
}  // namespace ft

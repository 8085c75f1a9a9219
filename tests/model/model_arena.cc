#include "tests/model/model_arena.h"

namespace ft::model {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer: a fixed, well-spread hash
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t TrueDigest(int64_t step, int shard) {
  return Mix(static_cast<uint64_t>(step) * 1000003ull + static_cast<uint64_t>(shard)) | 1;
}

uint64_t TornDigest(int64_t step, int shard, uint64_t salt) {
  return Mix(TrueDigest(step, shard) ^ Mix(salt + 0x7074)) & ~1ull;  // even: never a whole copy's
}

}  // namespace ft::model

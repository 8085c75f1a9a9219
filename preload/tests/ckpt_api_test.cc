// The C ABI's promise when ft itself fails: an entry point returns FT_INTERNAL and the app runs
// on. Here every allocation on the calling thread fails inside an entry, so the error text
// cannot be built either: the entry must still return, never throw out of its noexcept (which
// std::terminate()s the app). Its own process (preload.ckpt_api).
#define FT_WEAK_IMPORT
#include "include/ft/ft.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <string>
#include <vector>

// The replacement pair below is malloc/free underneath, which GCC cannot see through.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
thread_local bool t_refuse_allocations = false;
}  // namespace

// Replaces the program's operator new (libft.so's calls bind to it too): refuses on demand.
void* operator new(std::size_t n) {
  if (t_refuse_allocations) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The nothrow pair too (std::stable_sort's buffer, among others): the default one would take
// its memory from the runtime's operator new and give it back through the free above, which
// AddressSanitizer reports as an alloc-dealloc mismatch in every test of this binary.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return t_refuse_allocations ? nullptr : std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace ft::preload::ckpt_test {
namespace {

TEST(CkptApi, OutOfMemoryInsideAnEntryIsFtInternalNotATermination) {
  std::vector<uint8_t> host(4096);
  ASSERT_EQ(ft_register("weights", host.data(), 1024), FT_OK) << ft_last_error();
  t_refuse_allocations = true;
  const int result = ft_register("optimizer-state-with-a-long-name", host.data() + 1024, 1024);
  t_refuse_allocations = false;
  EXPECT_EQ(result, FT_INTERNAL);
  const std::string why = ft_last_error();
  EXPECT_NE(why.find("internal error"), std::string::npos) << why;
  // The app's next call works as before.
  EXPECT_EQ(ft_register("more", host.data() + 2048, 1024), FT_OK) << ft_last_error();
}

}  // namespace
}  // namespace ft::preload::ckpt_test

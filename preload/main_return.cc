// glibc's program entry calls main through __libc_start_main. libft.so, preloaded, defines it
// first: it hands the C library's own a main that calls the program's and then marks that it
// returned. Nothing else changes — the same arguments, the same status to exit() — and a
// program whose entry does not come through here (a static binary, libft.so loaded by dlopen,
// another C library) reads kUnknown, as before this existed.
#include "preload/main_return.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>

namespace ft::preload {
namespace {

using MainFn = int (*)(int, char**, char**);
// The C library's; `init` is a pointer whatever its type in this glibc (it changed in 2.34).
using StartMainFn = int (*)(MainFn, int, char**, void*, void (*)(), void (*)(), void*);

MainFn g_program_main = nullptr;
std::atomic<MainState> g_main_state{MainState::kUnknown};

int MainThenMarkReturn(int argc, char** argv, char** envp) {
  const int status = g_program_main(argc, argv, envp);
  g_main_state.store(MainState::kReturned, std::memory_order_release);
  return status;
}

}  // namespace

MainState ProgramMain() { return g_main_state.load(std::memory_order_acquire); }

}  // namespace ft::preload

#if defined(__GLIBC__)
extern "C" __attribute__((visibility("default"))) int __libc_start_main(
    ft::preload::MainFn main, int argc, char** argv, void* init, void (*fini)(), void (*rtld_fini)(),
    void* stack_end) {
  using ft::preload::g_main_state;
  using ft::preload::MainState;
  // RTLD_NEXT: the definition after libft.so's in the lookup order, the C library's.
  static const auto real =
      reinterpret_cast<ft::preload::StartMainFn>(dlsym(RTLD_NEXT, "__libc_start_main"));
  if (real == nullptr) {
    // No C library entry to hand the program to: nothing can run it (not a state any glibc
    // process reaches; said plainly rather than jumping through a null pointer).
    static const char kMessage[] = "libft.so: __libc_start_main of the C library not found\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    _exit(127);
  }
  ft::preload::g_program_main = main;
  g_main_state.store(MainState::kRunning, std::memory_order_release);
  return real(ft::preload::MainThenMarkReturn, argc, argv, init, fini, rtld_fini, stack_end);
}
#endif  // __GLIBC__

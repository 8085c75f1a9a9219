// libft.so internal: whether the program's main has returned. A failing exit's save copies the
// registered buffers from inside exit(); by then a main that returned has destroyed its locals,
// and host memory they owned is freed — still mapped, so nothing faults, but no longer the
// app's state (the allocator has written its own bookkeeping over it). The checkpoint agent asks
// this before such a save (preload/ckpt/ckpt_agent_thread.cc).
#ifndef FT_PRELOAD_MAIN_RETURN_H_
#define FT_PRELOAD_MAIN_RETURN_H_

namespace ft::preload {

enum class MainState {
  kUnknown,   // main was not called through libft.so (loaded after start-up, another C library)
  kRunning,   // main has not returned: exit() was called from inside it, or from another thread
  kReturned,  // main returned: its locals are gone
};
MainState ProgramMain();

}  // namespace ft::preload

#endif  // FT_PRELOAD_MAIN_RETURN_H_

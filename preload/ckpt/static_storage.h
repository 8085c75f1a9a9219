// libft.so internal: whether a host range lies in static storage — a loaded object's writable
// segment (.data, .bss), which lives until the process ends. A failing exit after main
// returned still saves a host buffer there; one on the heap or the stack may have been main's
// (ckpt_agent_thread.cc, FinishAtExit).
#ifndef FT_PRELOAD_CKPT_STATIC_STORAGE_H_
#define FT_PRELOAD_CKPT_STATIC_STORAGE_H_

#include <cstdint>

namespace ft::preload::agent {

bool InStaticStorage(const void* ptr, uint64_t bytes);

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_STATIC_STORAGE_H_

// libft.so internal: the checkpoint agent behind include/ft/ft.h. It keeps the registration
// table, owns the rank's host arena (jitckpt/arena.h) and runs one thread, "ft-ckpt", that
// does every save and restore: just-in-time saves the mailbox asks for (shm/mailbox.h, kSave),
// periodic saves at ft_step_done (FT_CKPT_EVERY, or a kSaveAtStep command), and ft_restore's
// copies. One thread means a save and a restore never overlap on the arena, and every CUDA
// call of the agent is made from a thread the app never captures a graph on.
//
// Threads: the Api* functions are called from app threads (ckpt_api.cc catches everything);
// HandOverSaveCommand from the poller thread, which it never blocks beyond a short lock.
// The agent's lock is never held across a CUDA call, a file operation or a wait.
#ifndef FT_PRELOAD_CKPT_AGENT_H_
#define FT_PRELOAD_CKPT_AGENT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "shm/mailbox.h"

namespace ft::preload::agent {

// The calling thread's last error, for ft_last_error (ckpt_api.cc).
void SetLastError(std::string message);

// ft.h's entry points; each returns an ft_result and sets the last error on failure.
int ApiSetShard(int tp, int pp, int dp);
int ApiRegister(const char* name, const void* ptr, size_t bytes);
int ApiRegisterEnd();
int ApiUpdateBegin(void* stream);
int ApiStepDone(int64_t step);
int ApiRestore(int64_t* step);
int ApiSaveOnFailure();

// Poller thread: a kSave or kSaveAtStep command taken from the mailbox. The agent
// acknowledges it, at once (nothing registered, no arena) or when the save that serves it
// ends; the poller must not take it again.
void HandOverSaveCommand(const shm::Command& command) noexcept;

// App threads (the hooks of cudaFree, cudaFreeHost and cudaFreeAsync): the app gave back
// `bytes` of memory from `ptr` (1 when the hooks never saw it allocated). A registered buffer
// in that range is gone for good: every later save and restore refuses, naming it, instead of
// copying memory that faults, or that the runtime has handed to another allocation. Cheap
// when nothing is registered. Never throws.
void NoteMemoryFreed(const void* ptr, uint64_t bytes) noexcept;

// How a save before the process ends went.
enum class EndSave {
  kSaved,          // the last completed step is committed now
  kNothingNewer,   // no step completed in this process, or the last one is committed already
  kNotRegistered,  // ft_register_end not called (or no arena): nothing to save
  kUpdateRunning,  // the optimizer update in flight did not end: not saved (never a mix)
  kTimedOut,       // the grace ran out: nothing committed
  kFailed,         // the save failed or was torn (its log line says why)
};

// The process is about to end: saves the state of the last completed step into the arena, the
// same step rules for every cause, bounded by FT_CKPT_TERM_GRACE. `reason` names the cause in
// the log ("SIGTERM", "exit status 1", "ft_save_on_failure"). `caller_ends`: the calling thread
// is the one ending the process (exit(), ft_save_on_failure) and will finish no update, so an
// update in flight is waited for two step times, not half the grace. Called by the "ft-term"
// thread (term_signal.h), the exit handler and ft_save_on_failure; one at a time. Never throws.
EndSave SaveBeforeEnd(const char* reason, bool caller_ends) noexcept;

}  // namespace ft::preload::agent

#endif  // FT_PRELOAD_CKPT_AGENT_H_

// libft.so internal: the termination save's signal side. When a launcher, a scheduler or a
// preemption tells a rank to end (SIGTERM by default, FT_CKPT_ON_SIGNAL), the rank's registered
// state is saved into its arena first, and then the signal does exactly what it would have
// done without ft: the app's own handler runs (once, on the thread the signal first hit), or
// the default action (the process ends by that signal) follows.
//
//   Arm        called once libft.so is active (its first CUDA call, preload/lifecycle.cc):
//              takes the app's current disposition of each signal as its own and installs
//              ours in the kernel. Until something is registered a signal
//              saves nothing (SaveBeforeEnd: not registered) but is marked in the segment, so
//              the worker reads the rank's end as a teardown. With FT_ENABLE=0, or before
//              libft.so is active, nothing is changed.
//   handler    async-signal-safe: marks the segment header (terminate_signal), wakes the
//              "ft-term" thread and returns at once (the thread it hit may be the one whose
//              update the save waits for). Installed with SA_RESTART when the app has no
//              handler, so no call of the app is interrupted that would not have been; an app
//              that reaches exit() meanwhile still ends by the signal (FinishAtExit). A
//              signal arriving while the save runs is merged into the first (as the kernel
//              merges a pending standard signal).
//   ft-term    runs the save (bounded by FT_CKPT_TERM_GRACE), then sends the first signal
//              again, with its siginfo, to the thread it hit; our handler then chains. When
//              the chained action leaves the process running (the app's handler returned), a
//              later signal saves again (a newer step), and the segment's mark is cleared at
//              the second step completed since (NoteStepDone): a handler that ends the program
//              returns too (the step in progress may still complete), and its exit stays a
//              teardown.
//   chaining   the app's sigaction/signal (and bsd_signal, ssignal, sysv_signal, sigset) calls
//              for an armed signal are virtualized: they read and write the app's disposition,
//              never ours (so the app cannot lose its handler nor remove ours); SA_RESETHAND and
//              sa_mask are honoured when chaining. A signal the app ignores is ignored in the
//              kernel: it asks for no save and interrupts nothing.
//   exit       the first signal's action is owed once: when the app reaches exit() before
//              ft-term delivered it, exit takes it (FinishAtExit); when the app's handler ran
//              (and called exit, or ended the program), nothing more is owed.
// A forked child chains at once (it owns no save); an exec'd program starts clean.
#ifndef FT_PRELOAD_TERM_SIGNAL_H_
#define FT_PRELOAD_TERM_SIGNAL_H_

#include <csignal>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ft::preload::term {

// FT_CKPT_ON_SIGNAL: "SIGTERM,USR1" → {15, 10}; "" or "none" → {}. InvalidArgument naming the
// entry for an unknown signal or one that cannot be a termination request (KILL, SEGV...).
Status ParseSignals(std::string_view text, std::vector<int>* out);

// Installs the handler for `signals` (once per process; later calls do nothing). App thread.
void Arm(const std::vector<int>& signals);

// At exit(), after the agent's own wait: a termination save in progress is waited for (the
// grace), then a default action the signal still owes is taken (the process ends by it); a
// signal the app's handler already took owes nothing (exit's status stands).
void FinishAtExit() noexcept;

// ft_step_done (any app thread): the second step completed after the app's handler took a
// signal and returned clears the segment's terminating mark: a running rank again.
// Lock-free (one atomic load) unless a mark is to be cleared.
void NoteStepDone() noexcept;

// Blocks FT_CKPT_ON_SIGNAL's signals in the calling thread: libft.so's own threads (the poller,
// the agent and its checksum helpers) never take one, so the handler always runs on an app
// thread and never on a thread the save needs.
void BlockTerminationSignals() noexcept;

// What the interposed sigaction/signal do; exported by term_signal.cc as the libc names.
int AppSigaction(int sig, const struct sigaction* act, struct sigaction* old);

}  // namespace ft::preload::term

#endif  // FT_PRELOAD_TERM_SIGNAL_H_

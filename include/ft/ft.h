/* ft.h — the one public header of ft: a training program registers the state it wants saved
 * just in time and restores it at start-up. Plain C, usable from C, C++ and ctypes.
 *
 * Every entry point is exported by libft.so (loaded with LD_PRELOAD or linked) and is
 * fail-open: it returns an ft_result code, never aborts, never throws, never blocks longer
 * than its comment says. A program that must also run without libft.so defines
 * FT_WEAK_IMPORT before including this header: the declarations become weak, and
 * ft_available() tells whether the library is there (every call is then guarded by it).
 *
 * Typical use (one rank):
 *   ft_set_shard(tp_index, pp_index, dp_index);          // optional
 *   ft_register("layer0.weight", dev_ptr, bytes);         // each tensor of model + optimizer
 *   ft_register_end();                                    // sizes the host arena (pinned beside)
 *   int64_t step = 0;
 *   if (ft_restore(&step) == FT_OK) start_at = step;      // FT_NO_CHECKPOINT: from scratch
 *   for (...) { ...; ft_update_begin(stream); optimizer(); sync; ft_step_done(++step); }
 *
 * Threads: every function may be called from any thread; registration and restore are meant
 * for start-up, before the training loop. See docs/checkpoints.md.
 */
#ifndef FT_FT_H_
#define FT_FT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes; ft_version() returns the library's. A library
 * answers every call of an older header; a newer header's new calls are absent from an older
 * library (weak imports then read as null). */
#define FT_ABI_VERSION 3  /* 2: ft_save_on_failure; 3: ft_set_total_steps */

typedef enum ft_result {
  FT_OK = 0,
  FT_DISABLED = 1,          /* libft.so is not active (FT_ENABLE=0, no segment, fork child):
                               nothing is registered, saved or restored */
  FT_INVALID_ARGUMENT = 2,  /* a null or empty name, a null pointer, zero bytes, a duplicate
                               name, registration after ft_register_end(); or a registered
                               buffer the app freed: no save or restore from then on */
  FT_NO_SPACE = 3,          /* the host arena does not fit (arena directory full, or locking
                               pinned memory refused); training runs on without saves */
  FT_NO_CHECKPOINT = 4,     /* ft_restore: no restore plan, or the plan has no step: start
                               from scratch */
  FT_LAYOUT_MISMATCH = 5,   /* ft_restore: the saved buffers' names or sizes differ from the
                               registered ones; nothing was restored */
  FT_CORRUPT = 6,           /* ft_restore: every copy of the planned step failed verification
                               or could not be read. Chunks go to the buffers as they verify,
                               so when the last copy failed midway the buffers hold part of
                               the checkpoint (ft_last_error says so): re-initialize them, or
                               stop, rather than train from them */
  FT_CUDA_ERROR = 7,        /* a CUDA call failed (message in ft_last_error) */
  FT_TIMEOUT = 8,           /* ft_restore: no restore plan from the worker within
                               FT_RESTORE_WAIT (is ftworker running on this node?) */
  FT_INTERNAL = 9           /* a bug in ft: please report ft_last_error() */
} ft_result;

/* FT_ABI_VERSION of the loaded library. */
int ft_version(void);

/* A short English name of a result code ("FT_NO_SPACE: ..."); never null. */
const char* ft_result_string(int result);

/* The last error of the calling thread in words (what failed and what to do), or "". */
const char* ft_last_error(void);

/* Which model shard this rank holds: tensor- and pipeline-parallel index, and its
 * data-parallel replica index. Optional: -1 (the default) lets ftmaster take it from its
 * topology (--topology / --order) or from the communicators. Call before ft_register_end. */
int ft_set_shard(int tp, int pp, int dp);

/* Registers one buffer of state to save: device memory (cudaMalloc, cudaMallocAsync,
 * managed) or host memory, told apart by cudaPointerGetAttributes. `name` is copied (at most
 * 255 bytes); names must be unique; buffers are saved and restored in registration order.
 * Cheap: the arena is sized by ft_register_end. Call from start-up code. The buffer must stay
 * allocated: once the app frees it, saves and restores are refused (FT_INVALID_ARGUMENT). */
int ft_register(const char* name, const void* ptr, size_t bytes);

/* Ends registration: creates (or re-opens, keeping a committed copy a previous incarnation of
 * this rank left) the rank's host arena of the registered size in FT_CKPT_ARENA_DIR, checks that
 * the directory has room for it, and returns (milliseconds). ft's checkpoint thread then
 * reserves the arena's space, maps its pages and pins it (cudaHostRegister) beside the app's own
 * start-up (about 0.5 s per GiB on a GPU host); every save and restore comes after that, so the
 * first due ft_step_done snapshot waits for what is left of it. Called implicitly by the first
 * ft_step_done or ft_restore. FT_NO_SPACE when it does not fit (at this call, or later from the
 * call that finds the arena given up). */
int ft_register_end(void);

/* Optional: the optimizer is about to update the registered state on `stream` (a
 * cudaStream_t; null: the update may already be running). A save taken after the update's
 * device work began and before the next ft_step_done is marked torn and never restored.
 * With a stream (not one being captured into a graph), periodic saves stop blocking the host
 * (FT_CKPT_ASYNC=1, the default): if the last ft_step_done's snapshot may still be copying,
 * this call makes `stream` wait for those copies on the device (cudaStreamWaitEvent) before
 * anything else, so the optimizer cannot overwrite bytes being copied; the host does not
 * wait. Call it, on the stream the optimizer runs on, before every update; with a null or
 * capturing stream it waits on the host for the copies instead. */
int ft_update_begin(void* stream);

/* The optimizer step numbered `step` (the application's own number: what the checkpoint is
 * labelled with) is complete, or queued on the stream last given to ft_update_begin. Every
 * FT_CKPT_EVERY steps, or when `ftmaster save` asked for one, this call also takes a periodic
 * save:
 *  - the app gave ft_update_begin a stream (and FT_CKPT_ASYNC=1): a snapshot that never blocks
 *    the host. The copy is queued on ft's own stream behind the work queued on the app's
 *    stream so far; the call returns once every copy is issued (host-memory buffers are copied
 *    before it returns): 0.14 ms at the median for 1 GiB in 8 buffers on the CPU stand-in,
 *    where the blocking save of the same bytes takes 67-74 ms (bench/README.md). Checksums
 *    and the commit run in the background, and the next ft_update_begin orders the optimizer
 *    behind the copy. A save due while the previous one is still copying or checksumming is
 *    skipped (the next due step after it ends is taken), never waited for.
 *  - otherwise it returns once the device-to-host copy into the pinned arena is done; with a
 *    stream given to ft_update_begin it first waits for the step's work to end on the device,
 *    without one the state must be complete on the device when it is called (after a
 *    synchronize). Checksums and the commit run in the background.
 * A just-in-time or termination save copies the step the device holds, which may be older than
 * the last ft_step_done when the step's work is still queued (a hang past it): the markers this
 * call and ft_update_begin record on the stream say which (docs/checkpoints.md, "Which step a
 * copy holds"). Host-memory buffers are copied as the host left them: a device behind its host
 * makes such a copy torn. Without a stream, ft_step_done's word is taken. */
int ft_step_done(int64_t step);

/* Optional: the job runs `total_steps` steps in all, numbered as it numbers them for
 * ft_step_done (a job that labels a step with the steps completed, as trainsim and the Python
 * helper do, passes its step count; the steps left are total_steps minus the last step done).
 * ftmaster then weighs a lasting slowdown over the steps left instead of FT_SLOW_HORIZON: a
 * job about to end is not stopped to replace a slow node. Overrides FT_TOTAL_STEPS; any thread,
 * any time, any number of times (the last one holds). FT_INVALID_ARGUMENT when total_steps < 1
 * (the previous value stays). Since ABI 3: with FT_WEAK_IMPORT, check it is non-null (or
 * ft_version() >= 3). */
int ft_set_total_steps(int64_t total_steps);

/* At start-up, after registration: asks this node's ftworker for the job's restore plan
 * (waiting up to FT_RESTORE_WAIT for it), takes the fastest verified copy of the planned step
 * for this rank's shard available on this node (its own arena, a same-node peer's arena, the
 * local checkpoint directory, the remote directory), verifies every chunk, and copies all
 * registered buffers back — all or none. Before the first device write it waits for the
 * device's pending work (cudaDeviceSynchronize), so work the app queued earlier cannot land
 * on top of the restored bytes. FT_OK with *step = the restored step. */
int ft_restore(int64_t* step);

/* The process is about to end because of a failure (an uncaught exception, a fatal error of
 * its own): saves the state of the last completed step into the host arena now, as a
 * termination signal's save does — one step, never a mix (an optimizer update that began and
 * does not end within two step times is not saved), a step already committed is not saved
 * again — within FT_CKPT_TERM_GRACE. Its peers usually die of the same failure moments later,
 * so nothing may be left alive to answer a just-in-time save. FT_OK when saved, or when there
 * is nothing newer to save (no step completed in this process, or the last one is committed);
 * FT_INVALID_ARGUMENT before ft_register_end (nothing saved); FT_TIMEOUT when the update in
 * flight or the save did not end in time; FT_CUDA_ERROR when the save failed. Any thread, any
 * number of times (one save at a time). A C or C++ program need not call it: exit() with a
 * non-zero status takes the same save (glibc); a Python process must, before the interpreter
 * frees its tensors (sys.excepthook). Once it returned the process counts as ending: later
 * save commands are refused (its memory is being freed), the saved copy stays. Since ABI 2: with FT_WEAK_IMPORT, check it is non-null
 * (or ft_version() >= 2). */
int ft_save_on_failure(void);

#ifdef FT_WEAK_IMPORT
#pragma weak ft_version
#pragma weak ft_result_string
#pragma weak ft_last_error
#pragma weak ft_set_shard
#pragma weak ft_register
#pragma weak ft_register_end
#pragma weak ft_update_begin
#pragma weak ft_step_done
#pragma weak ft_set_total_steps
#pragma weak ft_restore
#pragma weak ft_save_on_failure
/* True when libft.so is loaded and provides this ABI. */
static inline int ft_available(void) { return ft_version != 0 && ft_version() >= 1; }
#endif

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FT_FT_H_ */

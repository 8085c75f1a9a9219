"""The rank's Python frames for ftworker (docs/health.md, "The stuck code's stack").

faulthandler writes every thread's Python frames, from a C signal handler, when the process gets
SIGNAL; the worker sends it when an incident names this rank (or `ftmaster stacks --rank R`
asks) and reads them from <FT_CKPT_ARENA_DIR>/ft-pystack.<pid>. The file's first line names this
process (pid and start time from /proc/self/stat): a file left by a dead process is never taken
for a new process with its pid. FT_STACKS=0 turns it off. Standard library only.
"""

import atexit
import faulthandler
import os
import signal

# ftworker/stacks/python_stack.h: SIGRTMIN + 6.
SIGNAL = signal.SIGRTMIN + 6
_file = None


def _start_time():
    with open("/proc/self/stat") as f:
        data = f.read()
    return data[data.rindex(")") + 2:].split()[19]  # field 22


def _remove(path, owner):
    if os.getpid() != owner:  # a forked child (a data loader worker) leaves its parent's file
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def enable():
    """Registers the handler once; any failure leaves training as it was (nothing raised)."""
    global _file
    if _file is not None or os.environ.get("FT_STACKS", "1") == "0":
        return
    try:
        directory = os.environ.get("FT_CKPT_ARENA_DIR") or "/dev/shm"
        path = os.path.join(directory, "ft-pystack.%d" % os.getpid())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        f = os.fdopen(fd, "w")
        f.write("ft-pystack %d %s\n" % (os.getpid(), _start_time()))
        f.flush()
        faulthandler.register(SIGNAL, file=f, all_threads=True, chain=False)
        _file = f
        atexit.register(_remove, path, os.getpid())
    except (OSError, ValueError, RuntimeError, IndexError):
        pass

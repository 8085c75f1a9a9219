#!/usr/bin/env python3
"""A Python training loop for term_signal_test.py (case python-exit), run under
LD_PRELOAD=libft.so: registers 256 KiB of host state through ctypes, then per step fills every
byte with step & 0xff and calls ft_step_done, printing "step <s>". Its SIGTERM handler calls
sys.exit(0), as most Python training programs' handlers do; an atexit handler prints
"atexit handler ran" (written at exit).

--terminate-after S (case python-terminate): after step S, std::terminate() is called through
ctypes, as a C++ extension ends a Python process (PyTorch's NCCL watchdog throws on a collective
timeout; nothing catches it)."""

import atexit
import ctypes
import signal
import sys
import time

SIZE = 256 * 1024


def main():
    lib = ctypes.CDLL(None)  # libft.so's ft_* are in the process (LD_PRELOAD)
    lib.ft_register.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.ft_step_done.argtypes = [ctypes.c_int64]
    lib.ft_update_begin.argtypes = [ctypes.c_void_p]
    state = ctypes.create_string_buffer(SIZE)
    if lib.ft_register(b"state", ctypes.addressof(state), SIZE) != 0 or lib.ft_register_end() != 0:
        print("ft: registration failed", flush=True)

    def on_term(signum, frame):
        print("python handler sig=%d: sys.exit(0)" % signum, flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    atexit.register(lambda: print("atexit handler ran", end=""))
    terminate_after = int(sys.argv[sys.argv.index("--terminate-after") + 1]) if "--terminate-after" in sys.argv else 0
    step = 0
    while True:
        step += 1
        lib.ft_update_begin(None)
        ctypes.memset(state, step & 0xFF, SIZE)
        lib.ft_step_done(step)
        print("step %d" % step, flush=True)
        if step == terminate_after:
            print("std::terminate after step %d" % step, flush=True)
            ctypes.CDLL("libstdc++.so.6")._ZSt9terminatev()  # std::terminate(): does not return
        time.sleep(0.02)


if __name__ == "__main__":
    main()

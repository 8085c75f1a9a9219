#!/usr/bin/env python3
"""python/ft end to end on the gpusim stand-ins: a Python program under LD_PRELOAD=libft.so
registers device memory (cudaMalloc through ctypes) and a host ctypes array as a nested state
dict, takes a periodic save (FT_CKPT_EVERY=1) at step_done(1), changes the buffers, points a
node plan file at its own arena, and restore() brings back step 1 byte for byte, and the Python
state (an ft.Values registered with them) as it was at step_done(1). Before that,
a plan with no step makes restore() return None; registering after register_end() raises
FtError(FT_INVALID_ARGUMENT); update_begin takes a stream object with cuda_stream (as a
torch.cuda.Stream) made with cudaStreamCreate. A second program with FT_ENABLE=0 (libft.so
loaded but disabled) gets NOT_AVAILABLE from every call (register_state: []), with one
warning, and its buffers untouched.

usage: ft_helper_e2e_test.py --python-dir P --libft L --gpusim-dir G --plan-tool T
"""

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

DEVICE_BYTES = 3 * 4096 + 100  # spans chunks of a small FT_CKPT_CHUNK, odd size
HOST_BYTES = 5000
H2D, D2H = 1, 2  # cudaMemcpyKind


class Stream:
    """What update_begin takes of a torch.cuda.Stream."""

    def __init__(self, handle):
        self.cuda_stream = handle


class Buffer:
    """An address and a size: what register_state takes of a torch.Tensor."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = ptr, nbytes

    def data_ptr(self):
        return self.ptr


def pattern(n, salt):
    return bytes((i * 7 + salt) & 0xFF for i in range(n))


def child(args):
    sys.path.insert(0, args.python_dir)
    import ft

    def check(cond, what):
        if not cond:
            print("FAIL: " + what, flush=True)
            sys.exit(1)

    def plan(*flags):
        p = subprocess.run([args.plan_tool, "--arena-dir", os.environ["FT_CKPT_ARENA_DIR"], "--job",
                            os.environ["FT_JOB"], "--node", os.environ["FT_NODE_ID"], "--ranks", "0"] + list(flags),
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, "node_plan_tool %s: %s %s" % (flags, p.stdout, p.stderr))
        print(p.stdout.strip(), flush=True)

    check(ft.available(), "libft.so's symbols not found although preloaded")
    check(ft.version() >= 1, "ft.version() = %r" % ft.version())
    # RTLD_GLOBAL: libft.so finds the runtime's functions through the global namespace.
    cudart = ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    dev = ctypes.c_void_p()
    check(cudart.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(DEVICE_BYTES)) == 0, "cudaMalloc")

    def to_device(data):
        src = ctypes.create_string_buffer(data, len(data))
        check(cudart.cudaMemcpy(dev, src, ctypes.c_size_t(len(data)), H2D) == 0, "cudaMemcpy H2D")

    def from_device():
        dst = ctypes.create_string_buffer(DEVICE_BYTES)
        check(cudart.cudaMemcpy(dst, dev, ctypes.c_size_t(DEVICE_BYTES), D2H) == 0, "cudaMemcpy D2H")
        return dst.raw

    host = (ctypes.c_uint8 * HOST_BYTES)()
    saved_dev, saved_host = pattern(DEVICE_BYTES, 1), pattern(HOST_BYTES, 2)
    to_device(saved_dev)
    ctypes.memmove(host, saved_host, HOST_BYTES)

    state = {"model": {"weight": Buffer(dev.value, DEVICE_BYTES)},
             "optim": {"state": [{"exp_avg": Buffer(ctypes.addressof(host), HOST_BYTES)}]},
             "progress": ft.Values(seen=5, epoch=(0, "a"))}
    progress = state["progress"]
    names = ft.register_state(state, state_bytes=4096)
    check(names == ["model.weight", "optim.state.0.exp_avg", "python_state"], "registered %r" % (names,))
    check(ft.set_shard(0, 0, 0) == ft.OK, "set_shard")
    check(ft.register_end() == ft.OK, "register_end")
    try:
        ft.register("late", dev.value, 16)
        check(False, "registering after register_end did not raise")
    except ft.FtError as e:
        check(e.code == ft.INVALID_ARGUMENT and e.name == "FT_INVALID_ARGUMENT", "late register: %r" % e)
        print("OK: late registration refused: %s" % e, flush=True)

    plan("--none")
    check(ft.restore() is None, "restore() with a plan without a step")
    print("OK: restore() with no checkpoint -> None", flush=True)

    check(ft.update_begin(None) == ft.OK, "update_begin(None)")
    stream = ctypes.c_void_p()
    check(cudart.cudaStreamCreateWithFlags(ctypes.byref(stream), 1) == 0, "cudaStreamCreateWithFlags")
    check(ft.update_begin(Stream(stream.value)) == ft.OK, "update_begin(a stream object)")
    check(ft.update_begin(stream.value) == ft.OK, "update_begin(a stream handle)")
    check(ft.step_done(1) == ft.OK, "step_done(1)")  # FT_CKPT_EVERY=1: a periodic save of step 1
    # Training goes on: the buffers change after the save. As an optimizer must (docs/checkpoints.md,
    # "Order rules the app must keep"): on the stream given to update_begin, which waits there for
    # the snapshot's device copies; a write on another stream right after step_done races them.
    check(ft.update_begin(stream.value) == ft.OK, "update_begin before the next update")
    changed = ctypes.create_string_buffer(pattern(DEVICE_BYTES, 99), DEVICE_BYTES)
    check(cudart.cudaMemcpyAsync(dev, changed, ctypes.c_size_t(DEVICE_BYTES), H2D, stream) == 0,
          "cudaMemcpyAsync H2D on the update's stream")
    check(cudart.cudaStreamSynchronize(stream) == 0, "cudaStreamSynchronize")
    ctypes.memmove(host, pattern(HOST_BYTES, 98), HOST_BYTES)
    progress["seen"] = 99
    check(from_device() != saved_dev, "device bytes did not change")

    plan("--step", "1", "--wait-s", "30")  # waits for the save's commit
    step = ft.restore()
    check(step == 1, "restore() returned %r, expected 1" % (step,))
    check(from_device() == saved_dev, "device bytes differ from the saved ones after restore")
    check(bytes(host) == saved_host, "host bytes differ from the saved ones after restore")
    check(progress.state_dict() == {"seen": 5, "epoch": (0, "a")},
          "the Python state after restore: %r, expected step 1's" % (progress,))
    print("OK: restore() -> 1, device and host bytes are back", flush=True)


def disabled_child(args):
    """libft.so loaded, FT_ENABLE=0: every call NOT_AVAILABLE (register_state: []), one warning,
    nothing touched."""
    import warnings
    sys.path.insert(0, args.python_dir)
    import ft
    host = (ctypes.c_uint8 * 64)(*range(64))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [ft.register_state({"w": Buffer(ctypes.addressof(host), 64)}), ft.register_end(), ft.step_done(1),
                   ft.restore()]
    if not ft.available() or results[0] != [] or any(r is not ft.NOT_AVAILABLE for r in results[1:]):
        print("FAIL: disabled: available=%s results=%r" % (ft.available(), results))
        sys.exit(1)
    ours = [str(w.message) for w in caught if "ft: not available" in str(w.message)]
    if len(ours) != 1 or "disabled" not in ours[0] or bytes(host) != bytes(range(64)):
        print("FAIL: disabled: warnings %r" % ours)
        sys.exit(1)
    print("OK: FT_ENABLE=0: every call NOT_AVAILABLE, one warning: %s" % ours[0], flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--python-dir", required=True)
    p.add_argument("--libft", required=True)
    p.add_argument("--gpusim-dir", required=True)
    p.add_argument("--plan-tool", required=True)
    p.add_argument("--child", action="store_true")
    p.add_argument("--disabled-child", action="store_true")
    args = p.parse_args()
    if args.child:
        child(args)
        return
    if args.disabled_child:
        disabled_child(args)
        return
    tmp = tempfile.mkdtemp(prefix="ft-python-")
    arena_dir = tempfile.mkdtemp(prefix="ft-python-arena-", dir="/dev/shm")
    try:
        env = dict(os.environ)
        env.update({
            "LD_PRELOAD": args.libft,
            "LD_LIBRARY_PATH": args.gpusim_dir,
            "FT_JOB": "pyhelper-%d" % os.getpid(),
            "FT_NODE_ID": "node0",
            "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
            "FT_CKPT_EVERY": "1",
            "FT_CKPT_CHUNK": "4kb",
            "FT_CKPT_ARENA_DIR": arena_dir,
            "FT_RESTORE_WAIT": "5s",
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        cmd = [sys.executable, __file__, "--child", "--python-dir", args.python_dir, "--libft", args.libft,
               "--gpusim-dir", args.gpusim_dir, "--plan-tool", args.plan_tool]
        for extra, flag in (({}, "--child"), ({"FT_ENABLE": "0"}, "--disabled-child")):
            r = subprocess.run([c if c != "--child" else flag for c in cmd], env=dict(env, **extra), cwd=tmp,
                               capture_output=True, text=True, timeout=120)
            print(r.stdout)
            print(r.stderr[-4000:])
            if r.returncode != 0:
                print("FAIL: the program (%s) exited %d" % (flag, r.returncode))
                sys.exit(1)
        print("OK")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(arena_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

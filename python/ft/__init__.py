"""ft: just-in-time checkpoints of a training process, from Python (pure Python over ctypes).

    import ft
    ft.init_optimizer_state(optimizer)   # its lazily created state, training unchanged
    ft.register_state({"model": model, "optim": optimizer, "sched": scheduler, "rng": ft.RngState()})
    ft.register_end()
    start = ft.restore() or 0            # the restored step, or None: from scratch
    for step in range(start, steps):
        ...backward...
        ft.update_begin(torch.cuda.current_stream().cuda_stream)
        optimizer.step(); scheduler.step()
        torch.cuda.current_stream().synchronize()
        ft.step_done(step + 1)           # also writes the Python state of this step

The functions call libft.so's C ABI (include/ft/ft.h, docs/checkpoints.md). Without libft.so
(not preloaded, no FT_LIBRARY) or with it disabled (FT_ENABLE=0), every call does nothing and
returns NOT_AVAILABLE, which is falsy (register_state: an empty list); one warning says why.
Errors raise FtError.
"""

import ctypes
import threading
import warnings

from . import _failure, _pystate
from ._flatten import collect, uninitialized_optimizers
from ._optim import init_optimizer_state
from ._pystate import STATE_BYTES, RngState, Values

__all__ = ["FtError", "NOT_AVAILABLE", "available", "version", "set_shard", "set_total_steps", "register",
           "register_state", "register_end", "update_begin", "step_done", "restore",
           "init_optimizer_state", "RngState", "Values", "STATE_BYTES"]

# ft_result codes (include/ft/ft.h).
OK = 0
DISABLED = 1
INVALID_ARGUMENT = 2
NO_SPACE = 3
NO_CHECKPOINT = 4
LAYOUT_MISMATCH = 5
CORRUPT = 6
CUDA_ERROR = 7
TIMEOUT = 8
INTERNAL = 9


class _NotAvailable:
    """What every call returns when libft.so is absent or disabled. Falsy."""

    def __bool__(self):
        return False

    def __repr__(self):
        return "ft.NOT_AVAILABLE"


NOT_AVAILABLE = _NotAvailable()


class FtError(RuntimeError):
    """A call into libft.so failed: code (an ft_result), name ("FT_NO_SPACE") and message
    (what failed and what to do, from ft_last_error)."""

    def __init__(self, code, name, message):
        super().__init__("%s (%d): %s" % (name, code, message))
        self.code = code
        self.name = name
        self.message = message


_lock = threading.Lock()
_state = {"loaded": False, "lib": None, "why": "", "warned": False}
# The Python state buffers registered (one per register_state call that held objects), written
# at every step_done and read back after restore.
_python_states = []


def _lib():
    with _lock:
        if not _state["loaded"]:
            from . import _library
            _state["lib"], _state["why"] = _library.load()
            _state["loaded"] = True
            if _state["lib"] is not None:
                from . import _stacks
                _stacks.enable()  # the worker can then read this rank's Python frames
        return _state["lib"]


def _not_available(why):
    with _lock:
        if not _state["warned"]:
            _state["warned"] = True
            warnings.warn("ft: not available (%s); checkpoints are off, training runs as without ft" % why,
                          RuntimeWarning, stacklevel=3)
    return NOT_AVAILABLE


def _error(lib, code):
    text = (lib.ft_result_string(code) or b"").decode("utf-8", "replace")
    name = text.split(":", 1)[0].strip() or "FT_%d" % code
    detail = (lib.ft_last_error() or b"").decode("utf-8", "replace")
    return FtError(code, name, detail or text)


def _call(fn_name, *args):
    """Calls fn_name; OK → OK, DISABLED → NOT_AVAILABLE, anything else raises FtError."""
    lib = _lib()
    if lib is None:
        return _not_available(_state["why"])
    code = getattr(lib, fn_name)(*args)
    if code == OK:
        return OK
    if code == DISABLED:
        return _not_available("libft.so is disabled (FT_ENABLE=0, no segment, or a forked child)")
    raise _error(lib, code)


def available():
    """True when libft.so's ABI is there (it may still be disabled: calls then say so)."""
    return _lib() is not None


def version():
    """The library's ABI version (ft_version), or NOT_AVAILABLE."""
    lib = _lib()
    return lib.ft_version() if lib is not None else _not_available(_state["why"])


def set_shard(tp, pp, dp):
    """This rank's tensor- and pipeline-parallel index and data-parallel replica index."""
    return _call("ft_set_shard", int(tp), int(pp), int(dp))


def set_total_steps(total_steps):
    """The job runs `total_steps` steps in all, numbered as it numbers them for step_done (a loop
    that passes step + 1 passes its step count). ftmaster then weighs a lasting slowdown over the
    steps left instead of FT_SLOW_HORIZON: a job about to end is not stopped to replace a slow
    node. Overrides FT_TOTAL_STEPS; call it any time. FtError FT_INVALID_ARGUMENT below 1. A
    libft.so older than the call (ABI 3) does nothing with it: NOT_AVAILABLE, and a warning."""
    lib = _lib()
    if lib is None:
        return _not_available(_state["why"])
    if getattr(lib, "ft_set_total_steps", None) is None:
        warnings.warn("ft: this libft.so predates ft_set_total_steps (ABI 3): the master weighs a slowdown over "
                      "FT_SLOW_HORIZON; set FT_TOTAL_STEPS instead", RuntimeWarning, stacklevel=2)
        return NOT_AVAILABLE
    return _call("ft_set_total_steps", int(total_steps))


def register(name, ptr, nbytes):
    """One buffer: a device or host address (int) and its size in bytes."""
    return _call("ft_register", name.encode("utf-8"), ctypes.c_void_p(int(ptr)), int(nbytes))


def register_state(mapping, prefix="", state_bytes=STATE_BYTES):
    """Registers everything a run needs of `mapping`, nested mappings and lists flattened with
    dotted names under `prefix`:
      - every buffer (anything with data_ptr(), e.g. a tensor; its size is element_size() *
        nelement(), else nbytes) with ft_register;
      - a PyTorch module: its state_dict(keep_vars=True)'s tensors;
      - a PyTorch optimizer: its state tensors (names "<name>.state.<i>.<key>"), and its param
        groups' plain values (the learning rate a scheduler changes) in the Python state;
      - any other object with state_dict() and load_state_dict() (an LR scheduler, ft.RngState(),
        ft.Values(...), a sampler): its state_dict() in the Python state.
    The Python state is one host buffer of `state_bytes` (registered as "<prefix.>python_state"
    with the tensors), written at every step_done and given back to each object's
    load_state_dict() by restore(): saved, verified and restored with the same step.
    Returns the names registered, in order ([] when libft.so is absent or disabled, after the
    same checks). Every rank of a data-parallel group must register the same names and sizes in
    the same order, and hold the same bytes (a rank-dependent RNG seed makes its state differ).

    ValueError, before anything is registered: a value that is none of the above (a plain
    number, a string, None, an optimizer's state_dict() copy: it could not be put back where the
    program reads it), a non-contiguous tensor, a buffer whose size cannot be taken, nothing to
    save at all (no buffer with a byte, no object), an optimizer whose state is still empty (call
    init_optimizer_state first), or a Python state over `state_bytes`.

    Every registered object is kept alive for the life of the process (libft.so may copy it
    until the process is gone, interpreter shutdown included)."""
    found = collect(mapping, prefix)
    if found.refused:
        raise ValueError("ft.register_state: %s — nothing was registered. A plain value that changes belongs in an "
                         "object with state_dict()/load_state_dict() (ft.Values(...)); one the program recreates "
                         "(configuration) stays out of the mapping" %
                         "; ".join("%r is %s" % (n or "the mapping", why) for n, why in found.refused[:5]))
    empty = uninitialized_optimizers(mapping, prefix)
    if empty:
        raise ValueError("ft.register_state: %s is an optimizer's state dict without state (PyTorch creates it "
                         "in the first step): call ft.init_optimizer_state(optimizer) before taking the state "
                         "dict (an optimizer that keeps no state: leave its state dict out)" % " and ".join(repr(n or "the mapping") for n in empty))
    buffers = [b for b in found.buffers if b[2] > 0]
    if not buffers and not found.objects:
        if found.buffers:
            raise ValueError("ft.register_state: the mapping holds %d tensors (%s) but none has a byte to register: "
                             "nothing would be saved" % (len(found.buffers), ", ".join(b[0] for b in found.buffers[:5]) +
                                                        (", ..." if len(found.buffers) > 5 else "")))
        raise ValueError("ft.register_state: the mapping holds nothing to save (no tensor, no object with "
                         "state_dict()/load_state_dict())")
    python_state = None
    if found.objects:
        name = prefix + "." + "python_state" if prefix else "python_state"
        if _python_states:
            name += ".%d" % len(_python_states)
        python_state = _pystate.StateBuffer(name, found.objects, int(state_bytes))  # ValueError if too large
    lib = _lib()
    if lib is None:
        _not_available(_state["why"])
        return []
    names = []
    for name, ptr, nbytes, value in buffers:
        result = register(name, ptr, nbytes)
        if result is NOT_AVAILABLE:
            return []
        _keep_forever(value)
        names.append(name)
    if python_state is not None:
        if register(python_state.name, python_state.address(), python_state.capacity) is NOT_AVAILABLE:
            return []
        _python_states.append(python_state)
        names.append(python_state.name)
    _failure.install(lib)
    return names


def _keep_forever(value):
    """libft.so may copy a registered buffer at any moment until the process is gone: a save
    the master asks for, or one at termination, can come while the interpreter is shutting
    down after an uncaught exception, when it frees every tensor (and the allocator writes into
    the freed memory). A registered tensor therefore holds one reference that is never
    released: its memory stays the state it held after the last step for the life of the
    process (there is no unregistering in ft.h either)."""
    incref = ctypes.pythonapi.Py_IncRef
    incref.argtypes = [ctypes.py_object]
    incref.restype = None
    incref(value)


def register_end():
    """Sizes the host arena (ft's checkpoint thread reserves and pins it beside the program's
    start-up). FtError FT_NO_SPACE when it does not fit: catch it to train on without checkpoints."""
    return _call("ft_register_end")


def _stream_handle(stream):
    if stream is None:
        return None
    handle = getattr(stream, "cuda_stream", stream)  # a torch.cuda.Stream or its handle
    return ctypes.c_void_p(int(handle))


def update_begin(stream=None):
    """The optimizer is about to update the state on `stream` (a torch stream's cuda_stream
    int, a torch.cuda.Stream, or None: the update may already be running)."""
    return _call("ft_update_begin", _stream_handle(stream))


def step_done(step):
    """Optimizer step `step` (the application's own number) is complete on the device, and the
    objects in the Python state (a scheduler: step it before this call) hold this step's
    values: they are written into their buffer first. ValueError when they outgrew the buffer
    (the step is then not reported: no copy of it is taken)."""
    if _lib() is None:
        return _not_available(_state["why"])
    for python_state in _python_states:
        python_state.write()
    return _call("ft_step_done", int(step))


def restore():
    """At start-up, after registration: the restored step (every registered buffer now holds
    it), or None when there is no checkpoint to restore. FtError on a failure (nothing was
    restored: do not train from scratch silently)."""
    lib = _lib()
    if lib is None:
        return _not_available(_state["why"])
    step = ctypes.c_int64(-1)
    code = lib.ft_restore(ctypes.byref(step))
    if code == OK:
        for python_state in _python_states:
            try:
                python_state.load()
            except Exception as e:
                raise FtError(CORRUPT, "FT_CORRUPT", "step %d was restored but its Python state %r could not be read "
                              "back (%s: %s): do not train on, the run would not be the one saved" %
                              (step.value, python_state.name, type(e).__name__, e)) from e
        return step.value
    if code == NO_CHECKPOINT:
        return None
    if code == DISABLED:
        return _not_available("libft.so is disabled (FT_ENABLE=0, no segment, or a forked child)")
    raise _error(lib, code)

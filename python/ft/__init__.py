"""ft: just-in-time checkpoints of a training process, from Python (pure Python over ctypes).

    import ft
    ft.init_optimizer_state(optimizer)   # its lazily created state, training unchanged
    ft.register_state({"model": model.state_dict(), "optim": optimizer.state_dict()})
    ft.register_end()
    start = ft.restore() or 0            # the restored step, or None: from scratch
    for step in range(start, steps):
        ...backward...
        ft.update_begin(torch.cuda.current_stream().cuda_stream)
        optimizer.step()
        torch.cuda.current_stream().synchronize()
        ft.step_done(step + 1)

The functions call libft.so's C ABI (include/ft/ft.h, docs/checkpoints.md). Without libft.so
(not preloaded, no FT_LIBRARY) or with it disabled (FT_ENABLE=0), every call does nothing and
returns NOT_AVAILABLE, which is falsy; one warning says why. Errors raise FtError.
"""

import ctypes
import threading
import warnings

from ._flatten import uninitialized_optimizers, walk
from ._optim import init_optimizer_state

__all__ = ["FtError", "NOT_AVAILABLE", "available", "version", "set_shard", "register",
           "register_state", "register_end", "update_begin", "step_done", "restore",
           "init_optimizer_state"]

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


def _lib():
    with _lock:
        if not _state["loaded"]:
            from . import _library
            _state["lib"], _state["why"] = _library.load()
            _state["loaded"] = True
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


def register(name, ptr, nbytes):
    """One buffer: a device or host address (int) and its size in bytes."""
    return _call("ft_register", name.encode("utf-8"), ctypes.c_void_p(int(ptr)), int(nbytes))


def register_state(mapping, prefix=""):
    """Registers every buffer of `mapping` (anything with data_ptr(), e.g. a PyTorch state
    dict of a model and an optimizer; its size is element_size() * nelement(), else nbytes),
    nested mappings and lists flattened with dotted names under `prefix`. Returns the names
    registered, in order, or NOT_AVAILABLE. Every rank of a data-parallel group must register
    the same names and sizes in the same order (a state dict's order is deterministic).

    ValueError, before anything is registered: a non-contiguous tensor, a buffer whose size
    cannot be taken, or a mapping that holds buffers of which none has a byte to register
    (nothing would be saved, and restore() would fail later), or an optimizer's state dict
    whose state is still empty (its first step creates it: call init_optimizer_state first,
    or a restore would leave the optimizer's state at zero under restored parameters).

    Every registered object is kept alive for the life of the process (libft.so may copy it
    until the process is gone, interpreter shutdown included)."""
    if _lib() is None:
        return _not_available(_state["why"])
    found = walk(mapping, prefix)
    empty = uninitialized_optimizers(mapping, prefix)
    if empty:
        raise ValueError("ft.register_state: %s is an optimizer's state dict without state (PyTorch creates it "
                         "in the first step): call ft.init_optimizer_state(optimizer) before taking the state "
                         "dict (an optimizer that keeps no state: leave its state dict out)" % " and ".join(repr(n or "the mapping") for n in empty))
    buffers = [b for b in found if b[2] > 0]
    if found and not buffers:
        raise ValueError("ft.register_state: the mapping holds %d tensors (%s) but none has a byte to register: "
                         "nothing would be saved" % (len(found), ", ".join(b[0] for b in found[:5]) +
                                                    (", ..." if len(found) > 5 else "")))
    names = []
    for name, ptr, nbytes, value in buffers:
        result = register(name, ptr, nbytes)
        if result is NOT_AVAILABLE:
            return NOT_AVAILABLE
        _keep_forever(value)
        names.append(name)
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
    """Sizes and pins the host arena. FtError FT_NO_SPACE when it does not fit: catch it to
    train on without checkpoints."""
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
    """Optimizer step `step` (the application's own number) is complete on the device."""
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
        return step.value
    if code == NO_CHECKPOINT:
        return None
    if code == DISABLED:
        return _not_available("libft.so is disabled (FT_ENABLE=0, no segment, or a forked child)")
    raise _error(lib, code)

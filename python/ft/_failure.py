"""An uncaught exception is a crash: a rank that ends by one (a CUDA OOM, a NaN check, gloo's
"Connection closed by peer") saves its last completed step before the interpreter finalizes,
while its registered tensors are still alive, through libft.so's ft_save_on_failure() (older
libraries lack it: then nothing is installed).

The hook is a sys.excepthook that calls ft_save_on_failure() and then the hook it replaced (the
traceback is printed as before). torch.distributed.elastic's @record (torchrun's recommended
entry-point decorator, PyTorch 1.13) records the exception to its error file and re-raises it,
so the exception still reaches sys.excepthook: no second hook is needed there. An exception in
a thread other than the main one does not end the process (threading.excepthook) and is left
alone; sys.exit(n) is not an exception that reaches the hook (libft.so sees the exit status).
"""

import sys

_installed = {"hook": None}


def install(lib):
    """Installs the hook once, when `lib` exports ft_save_on_failure. Returns True if installed
    now or before."""
    if _installed["hook"] is not None:
        return True
    save = getattr(lib, "ft_save_on_failure", None) if lib is not None else None
    if save is None:
        return False
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        try:
            save()
        except Exception:  # never lose the traceback to our own failure
            pass
        previous(exc_type, exc, tb)

    hook.ft_previous = previous
    sys.excepthook = hook
    _installed["hook"] = hook
    return True


def uninstall():
    """Puts the replaced hook back (tests)."""
    hook = _installed["hook"]
    if hook is not None and sys.excepthook is hook:
        sys.excepthook = hook.ft_previous
    _installed["hook"] = None

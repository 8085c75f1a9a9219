"""Finding libft.so's C ABI (include/ft/ft.h) and declaring its signatures for ctypes.

Where the symbols come from, in order: the process itself (libft.so preloaded with LD_PRELOAD,
the usual way: its symbols are then in the global namespace), else the library named by
FT_LIBRARY, else "libft.so" on the loader's path. None when none of those provides ft_version.
"""

import ctypes
import os

# Signatures of ft.h's entry points (restype, argtypes).
_SIGNATURES = {
    "ft_version": (ctypes.c_int, []),
    "ft_result_string": (ctypes.c_char_p, [ctypes.c_int]),
    "ft_last_error": (ctypes.c_char_p, []),
    "ft_set_shard": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_int]),
    "ft_register": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]),
    "ft_register_end": (ctypes.c_int, []),
    "ft_update_begin": (ctypes.c_int, [ctypes.c_void_p]),
    "ft_step_done": (ctypes.c_int, [ctypes.c_int64]),
    "ft_restore": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int64)]),
}


# Entry points a library may lack (older builds): declared when present; check with hasattr.
_OPTIONAL = {
    "ft_save_on_failure": (ctypes.c_int, []),
    "ft_set_total_steps": (ctypes.c_int, [ctypes.c_int64]),  # ABI 3
}


def _declare(lib):
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    for name, (restype, argtypes) in _OPTIONAL.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes
    return lib


def _has_abi(lib):
    try:
        return all(hasattr(lib, name) for name in _SIGNATURES)
    except OSError:
        return False


def load():
    """(library or None, a sentence saying where it came from or why it is absent)."""
    tried = []
    try:
        this_process = ctypes.CDLL(None)
        if _has_abi(this_process):
            return _declare(this_process), "libft.so preloaded"
        tried.append("not preloaded (LD_PRELOAD)")
    except OSError as e:  # pragma: no cover - a process always has a global namespace
        tried.append("the process: %s" % e)
    path = os.environ.get("FT_LIBRARY") or "libft.so"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        tried.append("cannot load %s (%s)" % (path, e))
        return None, "; ".join(tried)
    if not _has_abi(lib):
        tried.append("%s does not export ft.h's functions" % path)
        return None, "; ".join(tried)
    return _declare(lib), "loaded " + path

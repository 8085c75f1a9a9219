"""Flattening a state mapping (a PyTorch state dict of a model and its optimizer, possibly
nested) into named buffers: anything with data_ptr() and nbytes is a buffer; mappings and
lists are walked with dotted names; every other value (learning rates, flags, None) is
configuration, not state, and skipped."""

from collections.abc import Mapping


def is_buffer(value):
    return callable(getattr(value, "data_ptr", None)) and hasattr(value, "nbytes")


def flatten(mapping, prefix=""):
    """[(name, pointer, bytes)] in the mapping's iteration order (a state dict's order is
    deterministic, and ranks must register in the same order). A non-contiguous tensor is a
    ValueError: its bytes are not one range."""
    out = []
    _walk(mapping, prefix, out)
    return out


def _join(prefix, key):
    key = str(key)
    return prefix + "." + key if prefix else key


def _walk(value, name, out):
    if is_buffer(value):
        contiguous = getattr(value, "is_contiguous", None)
        if callable(contiguous) and not contiguous():
            raise ValueError("ft: %r is not contiguous: register a contiguous tensor (.contiguous() "
                             "copies it; register the copy the program updates)" % name)
        nbytes = int(value.nbytes)
        if nbytes > 0:  # nothing to save; ft_register refuses zero bytes
            out.append((name, int(value.data_ptr()), nbytes))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, _join(name, key), out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _walk(item, _join(name, i), out)

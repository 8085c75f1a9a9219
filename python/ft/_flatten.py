"""Flattening a state mapping (a PyTorch state dict of a model and its optimizer, possibly
nested) into named buffers: anything with data_ptr() is a buffer (its size: element_size() *
nelement(), which every PyTorch has, else nbytes); mappings and lists are walked with dotted
names. A PyTorch module is its state_dict(keep_vars=True); a PyTorch optimizer is its state
tensors plus its param groups' plain values (the learning rate a scheduler changes); any other
object with state_dict() and load_state_dict() (an LR scheduler, ft.RngState, ft.Values, a
sampler) is kept whole in the Python state (_pystate). Any other value (a plain number, a
string, None, an optimizer's state dict copy) cannot be put back where the program reads it:
it is collected as refused, and register_state names it in a ValueError — nothing is dropped
silently."""

from collections.abc import Mapping

from . import _pystate


def is_buffer(value):
    return callable(getattr(value, "data_ptr", None))


def buffer_bytes(value, name):
    """The size of a buffer in bytes. PyTorch before 2.1 has no Tensor.nbytes: element_size()
    times nelement() is what every version has (for a contiguous tensor, exactly the bytes
    from data_ptr() on). A buffer with neither is a ValueError: skipping it would register
    nothing and say nothing."""
    element_size = getattr(value, "element_size", None)
    nelement = getattr(value, "nelement", None)
    if callable(element_size) and callable(nelement):
        return int(element_size()) * int(nelement())
    nbytes = getattr(value, "nbytes", None)
    if nbytes is not None:
        return int(nbytes)
    raise ValueError("ft: %r has data_ptr() but no size (neither element_size()/nelement() nor nbytes): "
                     "register it with ft.register(name, ptr, nbytes)" % name)


def flatten(mapping, prefix=""):
    """[(name, pointer, bytes)] in the mapping's iteration order (a state dict's order is
    deterministic, and ranks must register in the same order). A non-contiguous tensor is a
    ValueError: its bytes are not one range. Zero-byte buffers are left out."""
    return [(name, ptr, nbytes) for name, ptr, nbytes, _ in walk(mapping, prefix) if nbytes > 0]


def walk(mapping, prefix=""):
    """Like flatten, zero-byte buffers included, each with its object:
    [(name, pointer, bytes, buffer)]."""
    return collect(mapping, prefix).buffers


class Collected:
    """What a state mapping holds: buffers [(name, pointer, bytes, buffer)], objects kept in
    the Python state {name: object with state_dict/load_state_dict}, and the names of values
    that are neither (refused)."""

    def __init__(self):
        self.buffers = []
        self.objects = {}
        self.refused = []


def collect(mapping, prefix=""):
    out = Collected()
    _walk(mapping, prefix, out)
    return out


def is_module(value):
    return callable(getattr(value, "named_parameters", None)) and callable(getattr(value, "state_dict", None))


def is_optimizer_state_dict(value):
    return (isinstance(value, Mapping) and isinstance(value.get("state"), Mapping) and
            isinstance(value.get("param_groups"), (list, tuple)))


def _join(prefix, key):
    key = str(key)
    return prefix + "." + key if prefix else key


def _walk(value, name, out):
    if is_buffer(value):
        contiguous = getattr(value, "is_contiguous", None)
        if callable(contiguous) and not contiguous():
            raise ValueError("ft: %r is not contiguous: register a contiguous tensor (.contiguous() "
                             "copies it; register the copy the program updates)" % name)
        nbytes = buffer_bytes(value, name)
        out.buffers.append((name, int(value.data_ptr()) if nbytes > 0 else 0, nbytes, value))
    elif is_module(value):
        _walk(value.state_dict(keep_vars=True), name, out)
    elif _pystate.is_optimizer(value):
        _walk(value.state_dict()["state"], _join(name, "state"), out)
        out.objects[_join(name, "param_groups")] = _pystate.OptimizerGroups(value)
    elif _pystate.is_stateful(value):
        out.objects[name or "state"] = value
    elif is_optimizer_state_dict(value):
        # A copy: its param groups' learning rates cannot be put back into the optimizer.
        out.refused.append((name, "an optimizer's state dict (a copy: the learning rates of its param groups, "
                                  "which a scheduler changes, cannot be put back into the optimizer from it); "
                                  "register the optimizer itself"))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, _join(name, key), out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _walk(item, _join(name, i), out)
    else:
        out.refused.append((name, "a %s, which cannot be put back where the program reads it" % type(value).__name__))


def uninitialized_optimizers(mapping, prefix=""):
    """Names of the mappings in `mapping` (itself included) that look like a PyTorch
    optimizer's state dict ("state" and "param_groups") with parameters but no state yet.
    Plain SGD (momentum 0: SGD's groups are the ones with "nesterov") keeps no state."""
    out = []
    _find_optimizers(mapping, prefix, out)
    return out


def _find_optimizers(value, name, out):
    if _pystate.is_optimizer(value):
        value = value.state_dict()
    if isinstance(value, Mapping):
        state, groups = value.get("state"), value.get("param_groups")
        if isinstance(state, Mapping) and isinstance(groups, (list, tuple)):
            stateful = [g for g in groups if isinstance(g, Mapping) and g.get("params") and
                        not ("nesterov" in g and not g.get("momentum"))]
            if stateful and not state:
                out.append(name)
            return
        for key, item in value.items():
            _find_optimizers(item, _join(name, key), out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _find_optimizers(item, _join(name, i), out)

"""The small Python state of a run (an LR scheduler, an optimizer's learning rates, RNG states, a
sampler's position, counters) saved with the same step as the tensors: the objects' state_dict()
values are serialized, at every step_done, into one fixed-size host buffer that is registered
with ft_register like any tensor. It is then saved, digested, verified against the other
data-parallel replicas, replicated and restored by the same machinery, in the same step; after
restore() copied the bytes back, each object's load_state_dict() gets its values.

The buffer (STATE_BYTES by default, register_state(..., state_bytes=N) sets it) holds:
    8 bytes  magic b"FTPYST01"
    8 bytes  payload length, little-endian
    payload  a pickle (protocol 4) of {name: state} holding only None, bool, int, float,
             complex, str, bytes, list, tuple, dict, OrderedDict and tagged arrays (below)
    zeros    to the end
Tensors and numpy arrays are stored as ("__ft_array__", kind, dtype, shape, bytes) tuples, so the
pickle names no class but OrderedDict: it is read back with an unpickler that refuses every
other global. A state larger than the buffer is an error (ValueError naming the bound and how
to raise it), never a truncation.
"""

import collections
import collections.abc
import ctypes
import io
import pickle
import random
import struct

MAGIC = b"FTPYST01"
HEADER = 16
STATE_BYTES = 256 * 1024
_ARRAY = "__ft_array__"


def is_stateful(value):
    """An object whose state ft keeps through its state_dict()/load_state_dict() (an LR
    scheduler, ft.RngState, ft.Values, a sampler with both)."""
    return callable(getattr(value, "state_dict", None)) and callable(getattr(value, "load_state_dict", None))


def is_optimizer(value):
    """A PyTorch optimizer (its state tensors are registered; its param groups' values — the
    learning rate a scheduler changes — go into the Python state)."""
    return (is_stateful(value) and isinstance(getattr(value, "param_groups", None), list) and
            isinstance(getattr(value, "state", None), collections.abc.Mapping))


class OptimizerGroups:
    """The plain values of an optimizer's param groups (lr, betas, weight_decay, initial_lr...):
    a scheduler changes the learning rate in place every step, and optimizer.step() reads it
    from there. Restored in place, group by group."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def state_dict(self):
        return [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]

    def load_state_dict(self, groups):
        mine = self.optimizer.param_groups
        if len(groups) != len(mine):
            raise ValueError("ft: the saved optimizer has %d param groups, this one %d" % (len(groups), len(mine)))
        for group, saved in zip(mine, groups):
            for key, value in saved.items():
                group[key] = value


class RngState:
    """The random number generators' states: torch's CPU generator (torch.get_rng_state()),
    Python's `random`, and numpy's global generator when numpy is importable; each can be left
    out (RngState(python=False)). Every data-parallel replica must hold the same state, as for
    any registered state: seed every generator kept here alike on every rank (Python's `random`
    is seeded from the OS at start-up unless the program seeds it) — replicas whose bytes differ
    make the master judge the step untrusted, and it is never restored."""

    def __init__(self, torch=True, python=True, numpy=True):
        self.kinds = {"torch": torch, "python": python, "numpy": numpy}

    def state_dict(self):
        state = {}
        if self.kinds["python"]:
            state["python"] = random.getstate()
        torch = _module("torch") if self.kinds["torch"] else None
        if torch is not None:
            state["torch"] = torch.get_rng_state()
        np = _module("numpy") if self.kinds["numpy"] else None
        if np is not None:
            state["numpy"] = np.random.get_state()
        return state

    def load_state_dict(self, state):
        if "python" in state:
            random.setstate(_tuples(state["python"]))
        if "torch" in state:
            _module("torch").set_rng_state(state["torch"])
        if "numpy" in state:
            _module("numpy").random.set_state(_tuples(state["numpy"]))


class Values:
    """Named plain values a run keeps (an epoch, samples seen, a sampler's position), restored
    with the checkpoint: `progress = ft.Values(epoch=0, seen=0)`; `progress["seen"] += n`."""

    def __init__(self, **values):
        self._values = dict(values)

    def __getitem__(self, key):
        return self._values[key]

    def __setitem__(self, key, value):
        self._values[key] = value

    def __repr__(self):
        return "ft.Values(%s)" % ", ".join("%s=%r" % kv for kv in self._values.items())

    def state_dict(self):
        return dict(self._values)

    def load_state_dict(self, values):
        self._values = dict(values)


def _module(name):
    import sys
    if name in sys.modules:
        return sys.modules[name]
    try:
        return __import__(name)
    except ImportError:
        return None


def _tuples(value):
    """random.setstate wants tuples where a state round trip through lists might not keep them."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_tuples(v) for v in value)
    return value


# -- encoding ---------------------------------------------------------------------------------
_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def encode(value, name):
    """value with tensors and numpy arrays replaced by tagged tuples; ValueError naming the first
    value that is neither (a function, an arbitrary object: its bytes could not be restored)."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, collections.OrderedDict):
        return collections.OrderedDict((k, encode(v, "%s.%s" % (name, k))) for k, v in value.items())
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, _SCALARS):
                raise ValueError("ft: %r has a key of type %s: the Python state keeps plain keys" %
                                 (name, type(k).__name__))
            out[k] = encode(v, "%s.%s" % (name, k))
        return out
    if isinstance(value, (list, tuple)):
        items = [encode(v, "%s.%d" % (name, i)) for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    kind = type(value).__module__.split(".")[0]
    if kind == "torch" and callable(getattr(value, "data_ptr", None)):
        t = value.detach().cpu().contiguous()
        raw = t.view(-1).view(__import__("torch").uint8).numpy().tobytes() if t.nelement() else b""
        return (_ARRAY, "torch", str(t.dtype).replace("torch.", ""), tuple(t.shape), raw)
    if kind == "numpy" and hasattr(value, "dtype") and hasattr(value, "tobytes"):
        if value.dtype.hasobject:
            raise ValueError("ft: %r is a numpy array of Python objects: not kept" % name)
        return (_ARRAY, "numpy", value.dtype.str, tuple(value.shape), value.tobytes())
    raise ValueError("ft: %r is a %s.%s, which the Python state cannot keep (plain values, lists, dicts, "
                     "tensors and numpy arrays only): give its object a state_dict() of plain values" %
                     (name, type(value).__module__, type(value).__name__))


def decode(value):
    if isinstance(value, tuple) and len(value) == 5 and value[0] == _ARRAY:
        _, kind, dtype, shape, raw = value
        if kind == "numpy":
            np = _module("numpy")
            return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
        torch = _module("torch")
        t = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        return t.view(getattr(torch, dtype)).reshape(shape).clone()
    if isinstance(value, collections.OrderedDict):
        return collections.OrderedDict((k, decode(v)) for k, v in value.items())
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, tuple):
        return tuple(decode(v) for v in value)
    return value


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        raise pickle.UnpicklingError("ft: the Python state names %s.%s, which it never writes" % (module, name))


def pack(objects, capacity):
    """The buffer's bytes for {name: object} (each object's state_dict()), or ValueError."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=4)
    # No memo: the bytes depend on the values only, not on which objects happen to be shared
    # (replicas' copies are compared byte for byte).
    pickler.fast = True
    pickler.dump({name: encode(obj.state_dict(), name) for name, obj in objects.items()})
    payload = out.getvalue()
    if HEADER + len(payload) > capacity:
        raise ValueError("ft: the Python state (%s) takes %d bytes, over the %d its buffer holds: pass a larger "
                         "state_bytes to ft.register_state (the bound is fixed at registration; nothing was "
                         "truncated, this step is not saved)" %
                         (", ".join(objects), HEADER + len(payload), capacity))
    return MAGIC + struct.pack("<Q", len(payload)) + payload


def unpack(raw):
    """{name: state} from the buffer's bytes; ValueError when they are not a Python state."""
    if raw[:8] != MAGIC:
        raise ValueError("ft: the restored Python state buffer does not start with %r" % MAGIC)
    (length,) = struct.unpack("<Q", raw[8:HEADER])
    if HEADER + length > len(raw):
        raise ValueError("ft: the restored Python state says %d bytes, its buffer holds %d" % (length, len(raw)))
    return decode(_Unpickler(io.BytesIO(raw[HEADER:HEADER + length])).load())


class StateBuffer:
    """One registered Python state: a fixed-size host buffer (kept for the life of the process,
    as libft.so may copy it until then) and the objects whose state it holds."""

    def __init__(self, name, objects, capacity):
        if capacity <= HEADER:
            raise ValueError("ft: state_bytes %d is too small (the header alone takes %d)" % (capacity, HEADER))
        self.name = name
        self.objects = dict(objects)
        self.capacity = capacity
        self.buffer = ctypes.create_string_buffer(capacity)
        self.used = 0
        self.write()  # the bound is checked now, not at the first step

    def address(self):
        return ctypes.addressof(self.buffer)

    def write(self):
        raw = pack(self.objects, self.capacity)
        ctypes.memmove(self.buffer, raw, len(raw))
        if self.used > len(raw):  # the same state gives the same bytes, whatever came before
            ctypes.memset(ctypes.addressof(self.buffer) + len(raw), 0, self.used - len(raw))
        self.used = len(raw)

    def load(self):
        states = unpack(self.buffer.raw)
        missing = [n for n in self.objects if n not in states]
        if missing:
            raise ValueError("the saved Python state has no %s (it holds %s)" % (", ".join(missing), ", ".join(states)))
        for name, obj in self.objects.items():
            obj.load_state_dict(states[name])

#!/usr/bin/env python3
"""The small Python state of a run with a real PyTorch (Debian's python3-torch; run it with
/usr/bin/python3): a run interrupted after step K and resumed in fresh objects through
ft.restore() equals the uninterrupted run bit for bit — parameters, AdamW's state, the LR
scheduler, the optimizer's learning rate, the RNG states (dropout draws from torch's generator)
— with gradient clipping; the bound on the Python state is an error, never a truncation; an
uncaught exception calls ft_save_on_failure while the registered tensors are alive. libft.so
is replaced by a fake that keeps a copy of every registered buffer at each ft_step_done (as a
periodic save) and writes it back at ft_restore: no build needed.

usage: ft_pystate_unit_test.py PYTHON_DIR
"""

import ctypes
import random
import subprocess
import sys
import textwrap
import unittest

PYTHON_DIR = sys.argv.pop(1)
sys.path.insert(0, PYTHON_DIR)
try:
    import torch
except ImportError as e:  # a declared test dependency: say so, do not skip
    print("FAIL: PyTorch is not importable by %s (%s): python3-torch is a test dependency, install it with "
          "scripts/install-deps.sh" % (sys.executable, e), flush=True)
    sys.exit(1)
import ft  # noqa: E402
from ft import _failure  # noqa: E402


class CheckpointingLibrary:
    """Stands in for libft.so: ft_register records (name, ptr, bytes); ft_step_done copies every
    registered buffer (a periodic save every step); ft_restore writes the copy of `restore_step`
    back and answers that step."""

    def __init__(self):
        self.registered = []
        self.saved = {}
        self.restore_step = None

    def ft_register(self, name, ptr, nbytes):
        self.registered.append((name.decode("utf-8"), ptr.value or 0, int(nbytes)))
        return ft.OK

    def ft_step_done(self, step):
        self.saved[step] = [ctypes.string_at(ptr, n) for _, ptr, n in self.registered]
        return ft.OK

    def ft_update_begin(self, stream):
        return ft.OK

    def ft_register_end(self):
        return ft.OK

    def ft_restore(self, out):
        if self.restore_step is None:
            return ft.NO_CHECKPOINT
        for (_, ptr, n), raw in zip(self.registered, self.saved[self.restore_step]):
            ctypes.memmove(ptr, raw, n)
        out._obj.value = self.restore_step
        return ft.OK


class WithLibrary(unittest.TestCase):
    def setUp(self):
        self.saved_state = dict(ft._state)
        self.saved_states = list(ft._python_states)
        self.lib = CheckpointingLibrary()
        ft._state.update({"loaded": True, "lib": self.lib, "why": "", "warned": False})
        del ft._python_states[:]

    def tearDown(self):
        ft._state.clear()
        ft._state.update(self.saved_state)
        ft._python_states[:] = self.saved_states
        _failure.uninstall()

    def new_process(self):
        """What a relaunched process starts with: no Python state registered yet, the same
        library (its arena) holding the saved copies."""
        del ft._python_states[:]
        self.lib.registered = []


STEPS, K = 12, 7


def lr_at(step):
    return (step + 1) / 4.0 if step < 4 else 0.9 ** (step - 4)


class Run:
    """A training program: seeds, builds its objects, registers them, restores, trains."""

    def __init__(self, seed_noise=0):
        torch.manual_seed(1234)
        random.seed(1234)
        self.model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Dropout(0.3),
                                         torch.nn.Linear(16, 2))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=0.05, weight_decay=0.1)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_at)
        self.progress = ft.Values(samples=0)
        ft.init_optimizer_state(self.optimizer)
        self.names = ft.register_state({"model": self.model, "optim": self.optimizer, "sched": self.scheduler,
                                        "rng": ft.RngState(), "progress": self.progress})
        if seed_noise:  # a relaunch: the generators moved on differently before the restore
            torch.randn(seed_noise)
            random.random()
        self.start = ft.restore() or 0

    def train(self, until):
        for step in range(self.start, until):
            x = torch.randn(8, 6) + random.random()  # the global generators: both kept by ft
            loss = (self.model(x) ** 2).mean()
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 0.5)
            ft.update_begin(None)
            self.optimizer.step()
            self.scheduler.step()
            self.progress["samples"] += 8
            ft.step_done(step + 1)
        return self

    def state(self):
        tensors = [bits(t) for t in self.model.state_dict().values()]
        for s in self.optimizer.state_dict()["state"].values():
            tensors += [bits(v) for _, v in sorted(s.items())]
        return {"tensors": tensors, "lr": [g["lr"] for g in self.optimizer.param_groups],
                "sched": self.scheduler.state_dict(), "torch_rng": bits(torch.get_rng_state()),
                "python_rng": random.getstate(), "progress": self.progress.state_dict()}


def bits(t):
    t = t.detach().contiguous()
    return bytes(ctypes.string_at(t.data_ptr(), t.element_size() * t.nelement())) if t.nelement() else b""


class Resume(WithLibrary):
    def test_a_resumed_run_equals_the_uninterrupted_one_bit_for_bit(self):
        reference = Run().train(STEPS).state()
        self.new_process()
        self.lib.saved.clear()
        first = Run().train(K)
        self.assertIn(K, self.lib.saved)
        lr_at_k = first.optimizer.param_groups[0]["lr"]
        del first
        self.new_process()
        self.lib.restore_step = K
        resumed = Run(seed_noise=5)
        self.assertEqual(resumed.start, K)
        # The learning rate the scheduler had set at step K, not the first step's.
        self.assertEqual(resumed.optimizer.param_groups[0]["lr"], lr_at_k)
        self.assertEqual(resumed.scheduler.last_epoch, K)
        got = resumed.train(STEPS).state()
        for key in reference:
            self.assertEqual(got[key], reference[key], "%s differs from the uninterrupted run's" % key)

    def test_the_python_state_is_registered_last_with_its_bound(self):
        run = Run()
        self.assertEqual(run.names[-1], "python_state")
        self.assertEqual(self.lib.registered[-1][2], ft.STATE_BYTES)
        self.assertIn("optim.state.0.exp_avg", run.names)


class Bound(WithLibrary):
    def test_a_state_over_the_bound_is_an_error_at_registration(self):
        with self.assertRaisesRegex(ValueError, "takes \\d+ bytes, over the 256 .*state_bytes"):
            ft.register_state({"w": torch.ones(4), "rng": ft.RngState()}, state_bytes=256)
        self.assertEqual(self.lib.registered, [])

    def test_a_state_that_outgrows_the_bound_fails_step_done_without_reporting_it(self):
        values = ft.Values(log=[])
        ft.register_state({"w": torch.ones(4), "v": values}, state_bytes=1024)
        self.assertEqual(ft.step_done(1), ft.OK)
        values["log"] = list(range(1000))
        with self.assertRaisesRegex(ValueError, "over the 1024 its buffer holds.*nothing was truncated"):
            ft.step_done(2)
        self.assertEqual(sorted(self.lib.saved), [1])

    def test_what_cannot_be_kept_is_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, "'v.fn' is a builtins.function"):
            ft.register_state({"v": ft.Values(fn=lambda: 0)})
        with self.assertRaisesRegex(ValueError, "'lr' is a float"):
            ft.register_state({"w": torch.ones(4), "lr": 0.1})
        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with self.assertRaisesRegex(ValueError, "'optim' is an optimizer's state dict.*register the optimizer"):
            ft.register_state({"model": model, "optim": optimizer.state_dict()})
        self.assertEqual(self.lib.registered, [])

    def test_only_plain_values_and_arrays_are_read_back(self):
        import pickle
        import struct
        from ft import _pystate
        evil = pickle.dumps({"x": ctypes.c_int(1)}, protocol=4)  # names ctypes.c_int
        raw = _pystate.MAGIC + struct.pack("<Q", len(evil)) + evil
        with self.assertRaisesRegex(Exception, "never writes"):
            _pystate.unpack(raw)
        with self.assertRaisesRegex(ValueError, "does not start with"):
            _pystate.unpack(b"\0" * 64)


class FailureHook(WithLibrary):
    def test_an_uncaught_exception_saves_before_the_previous_hook(self):
        calls = []
        self.lib.ft_save_on_failure = lambda: calls.append("save") or 0
        previous = sys.excepthook
        sys.excepthook = lambda *a: calls.append(("previous", a[0]))
        try:
            ft.register_state({"w": torch.ones(4)})
            try:
                raise RuntimeError("boom")
            except RuntimeError:
                sys.excepthook(*sys.exc_info())
        finally:
            _failure.uninstall()
            sys.excepthook = previous
        self.assertEqual(calls, ["save", ("previous", RuntimeError)])

    def test_a_library_without_it_installs_nothing(self):
        previous = sys.excepthook
        ft.register_state({"w": torch.ones(4)})
        self.assertIs(sys.excepthook, previous)

    def test_in_a_process_the_tensors_are_alive_when_it_is_called(self):
        # A child process whose main raises: the hook's fake ft_save_on_failure reads the
        # registered tensor through its address (as libft.so copies it) and prints it.
        program = textwrap.dedent("""
            import ctypes, sys
            sys.path.insert(0, %r)
            import torch, ft
            class Lib:
                def ft_register(self, name, ptr, nbytes):
                    self.reg = (ptr.value, int(nbytes)); return 0
                def ft_save_on_failure(self):
                    data = ctypes.string_at(*self.reg)
                    print("saved", torch.frombuffer(bytearray(data), dtype=torch.float32).tolist(), flush=True)
                    return 0
            ft._state.update({"loaded": True, "lib": Lib(), "why": "", "warned": False})
            def main():
                w = torch.full((4,), 2.5)
                ft.register_state({"w": w})
                raise RuntimeError("injected")
            main()
        """ % PYTHON_DIR)
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn("saved [2.5, 2.5, 2.5, 2.5]", out.stdout)
        self.assertIn("RuntimeError: injected", out.stderr)  # the traceback still printed


if __name__ == "__main__":
    print("PyTorch %s (%s)" % (torch.__version__, sys.executable), flush=True)
    unittest.main(verbosity=2)

#!/usr/bin/env python3
"""python/ft with a real PyTorch (Debian's python3-torch, 1.13 here; run it with the
interpreter that has torch, /usr/bin/python3): register_state on a model's and an optimizer's
state dicts registers every tensor with its size (no Tensor.nbytes before PyTorch 2.1), a
mapping whose tensors yield nothing is an error, and init_optimizer_state creates an
optimizer's state so that training is bit-identical to a run without it. libft.so is replaced
by a recorder of ft_register calls: no build needed.

usage: ft_torch_unit_test.py PYTHON_DIR
"""

import ctypes
import sys
import unittest

sys.path.insert(0, sys.argv.pop(1))
try:
    import torch
except ImportError as e:  # a declared test dependency: say so, do not skip
    print("FAIL: PyTorch is not importable by %s (%s): python3-torch is a test dependency, install it with "
          "scripts/install-deps.sh" % (sys.executable, e), flush=True)
    sys.exit(1)
import ft  # noqa: E402


class RecordingLibrary:
    """Stands in for libft.so: records ft_register(name, ptr, bytes), answers FT_OK."""

    def __init__(self):
        self.registered = []

    def ft_register(self, name, ptr, nbytes):
        self.registered.append((name.decode("utf-8"), ptr.value or 0, int(nbytes)))
        return ft.OK


class WithRecorder(unittest.TestCase):
    def setUp(self):
        self.saved = dict(ft._state)
        self.saved_states = list(ft._python_states)
        self.lib = RecordingLibrary()
        ft._state.update({"loaded": True, "lib": self.lib, "why": "", "warned": False})
        del ft._python_states[:]

    def tearDown(self):
        ft._state.clear()
        ft._state.update(self.saved)
        ft._python_states[:] = self.saved_states


def model_and_optimizer(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3))
    return model, torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)


def expected(prefix, state):
    """(name, address, element_size * nelement) of every tensor of a flat state mapping."""
    return [("%s.%s" % (prefix, k), v.data_ptr(), v.element_size() * v.nelement()) for k, v in state.items()]


class RegisterState(WithRecorder):
    def test_every_tensor_of_a_model_and_an_adamw_is_registered_with_its_size(self):
        model, optimizer = model_and_optimizer()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()  # creates the optimizer's state (not init_optimizer_state: tested below)
        sd_model, sd_optim = model.state_dict(keep_vars=True), optimizer.state_dict()
        names = ft.register_state({"model": model, "optim": optimizer})
        want = expected("model", sd_model)
        for index, state in sd_optim["state"].items():
            want += expected("optim.state.%d" % index, state)
        # The optimizer's param groups' values (its learning rate) in the Python state, last.
        self.assertEqual(self.lib.registered[:-1], want)
        self.assertEqual(self.lib.registered[-1][0], "python_state")
        self.assertEqual(self.lib.registered[-1][2], ft.STATE_BYTES)
        self.assertEqual(names, [n for n, _, _ in want] + ["python_state"])
        sizes = dict((n, b) for n, _, b in self.lib.registered)
        # Parameters, BatchNorm's buffers (an int64 counter among them), Adam's state and its
        # step counter (a 0-dim float32 CPU tensor since PyTorch 1.12).
        self.assertEqual(sizes["model.0.weight"], 16 * 8 * 4)
        self.assertEqual(sizes["model.1.num_batches_tracked"], 8)
        self.assertEqual(sizes["optim.state.0.step"], 4)
        self.assertEqual(sizes["optim.state.0.exp_avg"], 16 * 8 * 4)
        self.assertEqual(sizes["optim.state.5.exp_avg_sq"], 3 * 4)
        self.assertEqual(len(want), 6 + 3 + 6 * 3)  # parameters, BatchNorm's buffers, AdamW's state
        # The registered addresses are the tensors the program updates in place.
        self.assertEqual(sizes["model.0.weight"], model[0].weight.element_size() * model[0].weight.nelement())
        self.assertEqual(dict((n, p) for n, p, _ in self.lib.registered)["model.0.weight"],
                         model[0].weight.data_ptr())

    def test_a_mapping_whose_tensors_yield_nothing_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "holds 2 tensors .* none has a byte"):
            ft.register_state({"a": torch.zeros(0), "b": {"c": torch.empty(0, 4)}})
        self.assertEqual(self.lib.registered, [])
        with self.assertRaisesRegex(ValueError, "holds nothing to save"):
            ft.register_state({"a": {}, "b": []})
        self.assertEqual(self.lib.registered, [])

    def test_a_buffer_without_a_size_is_an_error_not_skipped(self):
        class NoSize:
            def data_ptr(self):
                return 0x1000
        with self.assertRaisesRegex(ValueError, "'m.w' has data_ptr\\(\\) but no size"):
            ft.register_state({"m": {"w": NoSize()}})
        self.assertEqual(self.lib.registered, [])

    def test_an_optimizer_state_dict_without_state_is_an_error(self):
        model, optimizer = model_and_optimizer()
        with self.assertRaisesRegex(ValueError, "'optim' is an optimizer's state dict without state.*"
                                                "init_optimizer_state"):
            ft.register_state({"model": model.state_dict(), "optim": optimizer})
        self.assertEqual(self.lib.registered, [])
        # Plain SGD keeps no state: nothing to create, nothing refused (its learning rate is
        # kept in the Python state).
        plain = torch.optim.SGD(model.parameters(), lr=0.1)
        ft.register_state({"optim": plain, "w": model[0].weight})
        self.assertEqual([n for n, _, _ in self.lib.registered], ["w", "python_state"])

    def test_registered_tensors_outlive_the_program_s_references(self):
        # libft.so may copy them while the interpreter shuts down (a save asked for after an
        # uncaught exception): freed, their memory would hold the allocator's bookkeeping.
        w, e = torch.ones(4), torch.zeros(0)
        before = (sys.getrefcount(w), sys.getrefcount(e))
        ft.register_state({"w": w, "e": e})
        self.assertEqual((sys.getrefcount(w), sys.getrefcount(e)), (before[0] + 1, before[1]))

    def test_empty_tensors_next_to_others_are_left_out(self):
        w = torch.ones(4)
        self.assertEqual(ft.register_state({"e": torch.zeros(0), "w": w}), ["w"])
        self.assertEqual(self.lib.registered, [("w", w.data_ptr(), 16)])


def bits(t):
    """The tensor's bytes: equal bits, signed zeros and NaN payloads included."""
    t = t.detach().contiguous()
    return bytes(ctypes.string_at(t.data_ptr(), t.element_size() * t.nelement())) if t.nelement() else b""


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 2))
        # Its gradient is SIGNS exactly, -0.0 included: SGD's first step copies a gradient of
        # -0.0 into momentum_buffer, and a run with ft must too.
        self.scale = torch.nn.Parameter(torch.ones(3))

    def loss(self, x):
        return (self.body(x) ** 2).mean() + (self.scale * SIGNS).sum()


SIGNS = torch.tensor([-0.0, 0.5, -1.0])


def train(make_optimizer, init, steps=6, seed=1, scheduler=False):
    """A small model trained `steps` steps on deterministic data; `init`: call
    init_optimizer_state between constructing the optimizer and the first step. Returns the
    model, the optimizer, and the state tensors (by identity) right after the init."""
    torch.manual_seed(seed)
    model = Net()
    optimizer = make_optimizer(model.parameters())
    sched = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5) if scheduler else None
    created = []
    if init:
        ft.init_optimizer_state(optimizer)
        created = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    gen = torch.Generator().manual_seed(seed + 100)
    for _ in range(steps):
        loss = model.loss(torch.randn(5, 6, generator=gen))
        optimizer.zero_grad(set_to_none=True)  # a gradient of -0.0 stays one (0.0 + -0.0 is 0.0)
        loss.backward()
        optimizer.step()
        if sched is not None:
            sched.step()
    return model, optimizer, created


OPTIMIZERS = {
    "Adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "Adam-amsgrad-wd": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.05, amsgrad=True),
    "AdamW-wd": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    "SGD-momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    "SGD-nesterov-wd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
    "SGD-momentum-foreach": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=True),
    "SGD-plain": lambda p: torch.optim.SGD(p, lr=0.05),
    "Adamax": lambda p: torch.optim.Adamax(p, lr=0.01),
    "RAdam": lambda p: torch.optim.RAdam(p, lr=0.01),
    "NAdam": lambda p: torch.optim.NAdam(p, lr=0.01),
}


class InitOptimizerState(unittest.TestCase):
    def assert_same_training(self, make, scheduler=False):
        ref_model, ref_opt, _ = train(make, init=False, scheduler=scheduler)
        model, opt, created = train(make, init=True, scheduler=scheduler)
        for (name, a), b in zip(ref_model.named_parameters(), model.parameters()):
            self.assertTrue(torch.equal(a, b), "parameter %s differs" % name)
            self.assertEqual(bits(a), bits(b), "parameter %s differs in its bits" % name)
        ref_state, state = ref_opt.state_dict()["state"], opt.state_dict()["state"]
        self.assertEqual(sorted(ref_state), sorted(state))
        for index in ref_state:
            self.assertEqual(sorted(ref_state[index]), sorted(state[index]), "state keys of parameter %d" % index)
            for key, a in ref_state[index].items():
                b = state[index][key]
                if isinstance(a, torch.Tensor):
                    self.assertTrue(torch.equal(a, b), "state %d.%s differs" % (index, key))
                    self.assertEqual((a.dtype, a.device, a.shape), (b.dtype, b.device, b.shape))
                    self.assertEqual(bits(a), bits(b), "state %d.%s differs in its bits" % (index, key))
                else:
                    self.assertEqual(a, b, "state %d.%s" % (index, key))
        # The tensors created up front are the ones the optimizer kept updating (what ft
        # registered is what it saves).
        now = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        self.assertEqual([id(t) for t in created], [id(t) for t in now])

    def test_training_is_bit_identical_to_a_run_without_it(self):
        for name, make in OPTIMIZERS.items():
            with self.subTest(optimizer=name):
                self.assert_same_training(make)

    def test_with_an_lr_scheduler(self):
        self.assert_same_training(OPTIMIZERS["AdamW-wd"], scheduler=True)

    def test_state_is_created_parameters_and_gradients_untouched(self):
        torch.manual_seed(3)
        model = torch.nn.Linear(4, 3)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.5, weight_decay=0.5)
        before = [bits(p) for p in model.parameters()]
        grad = torch.full((3,), 7.0)
        model.bias.grad = grad
        self.assertEqual(ft.init_optimizer_state(optimizer), 2)
        self.assertEqual([bits(p) for p in model.parameters()], before)
        self.assertIs(model.bias.grad, grad)
        self.assertTrue(torch.equal(grad, torch.full((3,), 7.0)))
        self.assertIsNone(model.weight.grad)
        state = optimizer.state[model.weight]
        self.assertEqual(sorted(state), ["exp_avg", "exp_avg_sq", "step"])
        self.assertEqual(float(state["step"]), 0.0)
        self.assertEqual(state["exp_avg"].shape, model.weight.shape)
        self.assertFalse(state["exp_avg"].any() or state["exp_avg_sq"].any())
        self.assertEqual(ft.init_optimizer_state(optimizer), 0)  # again: nothing to do
        self.assertEqual(float(state["step"]), 0.0)

    def test_parameters_with_state_keep_it(self):
        torch.manual_seed(4)
        a, b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
        optimizer = torch.optim.Adam(a.parameters(), lr=0.1)
        a(torch.ones(1, 3)).sum().backward()
        optimizer.step()
        kept = {k: v.clone() for k, v in optimizer.state[a.weight].items()}
        a_bits = [bits(p) for p in a.parameters()]
        optimizer.add_param_group({"params": list(b.parameters())})
        self.assertEqual(ft.init_optimizer_state(optimizer), 2)
        self.assertEqual([bits(p) for p in a.parameters()], a_bits)
        for k, v in kept.items():
            self.assertTrue(torch.equal(optimizer.state[a.weight][k], v), k)
        self.assertEqual(float(optimizer.state[b.weight]["step"]), 0.0)

    def test_optimizers_it_cannot_handle_are_refused_untouched(self):
        model = torch.nn.Linear(2, 2)
        before = [bits(p) for p in model.parameters()]

        class MyAdam(torch.optim.Adam):
            pass
        for optimizer, error, words in (
                (MyAdam(model.parameters()), TypeError, "MyAdam is not supported .*Adam, AdamW"),
                (torch.optim.RMSprop(model.parameters()), TypeError, "RMSprop is not supported"),
                (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, dampening=0.5), ValueError,
                 "dampening 0.5")):
            with self.subTest(optimizer=type(optimizer).__name__):
                with self.assertRaisesRegex(error, words):
                    ft.init_optimizer_state(optimizer)
                self.assertEqual(len(optimizer.state), 0)
                self.assertEqual([bits(p) for p in model.parameters()], before)
                self.assertTrue(all(p.grad is None for p in model.parameters()))

    def test_an_optimizer_whose_state_exists_needs_nothing(self):
        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.Adagrad(model.parameters())  # creates its state in __init__
        self.assertEqual(ft.init_optimizer_state(optimizer), 0)


if __name__ == "__main__":
    print("PyTorch %s (%s)" % (torch.__version__, sys.executable), flush=True)
    unittest.main(verbosity=2)

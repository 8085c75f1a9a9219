#!/usr/bin/env python3
"""python/ft without libft.so: flattening of state dicts, and the not-available path (every
call a no-op returning NOT_AVAILABLE, one warning). No build, no GPU stand-in needed.

usage: ft_helper_unit_test.py PYTHON_DIR
"""

import os
import sys
import unittest
import warnings

sys.path.insert(0, sys.argv.pop(1))
os.environ["FT_LIBRARY"] = "/nonexistent/libft.so"
import ft  # noqa: E402
from ft._flatten import collect, flatten  # noqa: E402


class FakeTensor:
    """What register_state needs of a torch.Tensor."""

    def __init__(self, ptr, nbytes, contiguous=True):
        self.ptr, self.nbytes, self.contiguous = ptr, nbytes, contiguous

    def data_ptr(self):
        return self.ptr

    def is_contiguous(self):
        return self.contiguous


class Flatten(unittest.TestCase):
    def test_model_and_optimizer_state_dicts_flatten_with_dotted_names(self):
        state = {
            "model": {"layer0.weight": FakeTensor(0x1000, 64), "layer0.bias": FakeTensor(0x2000, 8)},
            "optim": {"state": {0: {"step": FakeTensor(0x3000, 4), "exp_avg": FakeTensor(0x4000, 64)}}},
        }
        self.assertEqual(flatten(state), [
            ("model.layer0.weight", 0x1000, 64),
            ("model.layer0.bias", 0x2000, 8),
            ("optim.state.0.step", 0x3000, 4),
            ("optim.state.0.exp_avg", 0x4000, 64),
        ])

    def test_prefix_lists_and_empty_tensors(self):
        self.assertEqual(flatten({"w": [FakeTensor(1, 4), FakeTensor(2, 0)]}, prefix="rank3"),
                         [("rank3.w.0", 1, 4)])
        self.assertEqual(flatten({}), [])

    def test_plain_values_and_state_dict_copies_of_optimizers_are_refused_by_name(self):
        got = collect({"model": {"w": FakeTensor(1, 4)}, "step": 7, "cfg": {"lr": 0.1, "name": None},
                       "optim": {"state": {}, "param_groups": [{"lr": 0.1, "params": [0]}]}})
        self.assertEqual([b[0] for b in got.buffers], ["model.w"])
        self.assertEqual([n for n, _ in got.refused], ["step", "cfg.lr", "cfg.name", "optim"])
        self.assertIn("register the optimizer itself", dict(got.refused)["optim"])

    def test_objects_with_state_dict_are_kept_whole(self):
        class Sched:
            def state_dict(self):
                return {"last_epoch": 3}

            def load_state_dict(self, state):
                pass
        sched = Sched()
        got = collect({"sched": sched, "w": FakeTensor(1, 4)}, prefix="p")
        self.assertEqual(got.objects, {"p.sched": sched})
        self.assertEqual(got.refused, [])

    def test_a_non_contiguous_tensor_is_refused_by_name(self):
        with self.assertRaisesRegex(ValueError, "'m.w' is not contiguous"):
            flatten({"m": {"w": FakeTensor(1, 4, contiguous=False)}})


class NotAvailable(unittest.TestCase):
    def test_every_call_is_a_falsy_no_op_with_one_warning(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertFalse(ft.available())
            results = [
                ft.version(),
                ft.set_shard(0, 0, 0),
                ft.register("w", 0x1000, 4),
                ft.register_state({"w": FakeTensor(0x1000, 4)}),
                ft.register_end(),
                ft.update_begin(None),
                ft.step_done(1),
                ft.restore(),
                ft.set_total_steps(1000),
            ]
        self.assertEqual(results.pop(3), [])  # register_state: a list, as with libft.so
        for r in results:
            self.assertIs(r, ft.NOT_AVAILABLE)
            self.assertFalse(r)
        self.assertEqual((ft.restore() or 0), 0)
        ours = [w for w in caught if "ft: not available" in str(w.message)]
        self.assertEqual(len(ours), 1, [str(w.message) for w in caught])
        self.assertIn("/nonexistent/libft.so", str(ours[0].message))

    def test_ft_error_carries_code_name_and_message(self):
        e = ft.FtError(3, "FT_NO_SPACE", "arena does not fit")
        self.assertEqual((e.code, e.name, e.message), (3, "FT_NO_SPACE", "arena does not fit"))
        self.assertIn("FT_NO_SPACE (3): arena does not fit", str(e))


class StepsLibrary:
    """Stands in for libft.so's ft_set_total_steps (include/ft/ft.h): FT_INVALID_ARGUMENT below 1."""

    def __init__(self):
        self.totals = []

    def ft_set_total_steps(self, total):
        if total < 1:
            self.error = b"ft_set_total_steps: total_steps must be at least 1, got %d" % total
            return ft.INVALID_ARGUMENT
        self.totals.append(total)
        return ft.OK

    def ft_result_string(self, code):
        return b"FT_INVALID_ARGUMENT: a bad argument"

    def ft_last_error(self):
        return self.error


class OlderLibrary:
    """A libft.so of ABI 2: no ft_set_total_steps."""

    def ft_version(self):
        return 2


class SetTotalSteps(unittest.TestCase):
    def setUp(self):
        self.saved_state = dict(ft._state)

    def tearDown(self):
        ft._state.clear()
        ft._state.update(self.saved_state)

    def use(self, lib):
        ft._state.update({"loaded": True, "lib": lib, "why": "", "warned": False})

    def test_passes_the_total_as_an_integer_and_raises_on_a_bad_one(self):
        lib = StepsLibrary()
        self.use(lib)
        self.assertEqual(ft.set_total_steps(1000), ft.OK)
        self.assertEqual(ft.set_total_steps(2500.0), ft.OK)
        self.assertEqual(lib.totals, [1000, 2500])
        self.assertIs(type(lib.totals[1]), int)
        with self.assertRaises(ft.FtError) as caught:
            ft.set_total_steps(0)
        self.assertEqual((caught.exception.code, caught.exception.name), (ft.INVALID_ARGUMENT, "FT_INVALID_ARGUMENT"))
        self.assertIn("at least 1, got 0", caught.exception.message)
        self.assertEqual(lib.totals, [1000, 2500])

    def test_a_library_older_than_the_call_is_not_available_and_says_so(self):
        self.use(OlderLibrary())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertIs(ft.set_total_steps(1000), ft.NOT_AVAILABLE)
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIn("predates ft_set_total_steps", str(caught[0].message))
        self.assertIn("FT_TOTAL_STEPS", str(caught[0].message))


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""The Python module as a user meets it, with or without a GPU."""

import os
import pathlib
import unittest

import fusebench

ROOT = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "crates" / "measure" / "tests" / "fixtures" / "explain"
HAS_GPU, WHY = fusebench.gpu_status()


def record(name):
    return fusebench.Measurement.from_json((FIXTURES / f"{name}.json").read_text())


class WithoutAGpu(unittest.TestCase):
    def test_import_and_status(self):
        self.assertTrue(fusebench.__version__)
        self.assertIsInstance(WHY, str)
        self.assertTrue(WHY)

    @unittest.skipIf(HAS_GPU, "a GPU is present")
    def test_kernel_time_says_why_it_cannot_measure(self):
        with self.assertRaises(fusebench.Unavailable) as e:
            fusebench.kernel_time(lambda: None)
        self.assertIn("cannot measure here", str(e.exception))
        self.assertIsInstance(e.exception, RuntimeError)
        # A traceback names it as users import it, not by the extension module.
        self.assertEqual(type(e.exception).__module__, "fusebench")
        self.assertEqual(type(e.exception).__qualname__, "Unavailable")

    @unittest.skipIf(HAS_GPU, "a GPU is present")
    def test_load_says_why_it_cannot_run(self):
        with self.assertRaises(fusebench.Unavailable):
            fusebench.load(str(ROOT / "examples" / "seed_rmsnorm_legacy.py"))

    def test_bad_arguments_are_value_errors(self):
        with self.assertRaises(ValueError):
            fusebench.kernel_time(lambda: None, cache="lukewarm")
        with self.assertRaises(ValueError):
            fusebench.kernel_time(lambda: None, flush="both")
        with self.assertRaises(ValueError):
            fusebench.kernel_time(lambda: None, cache="warm", flush="write")
        with self.assertRaises(ValueError):
            fusebench.load(str(ROOT / "crates" / "cli" / "tests" / "fixtures" / "explain" / "nope.py"))

    def test_resident_blocks_and_what_bounds_them(self):
        blocks, bound, sms = fusebench.resident(288, 123, 41600)
        self.assertEqual((blocks, bound), (1, "registers"))
        self.assertGreater(sms, 0)
        self.assertEqual(fusebench.resident(1024, 32)[:2], (2, "threads"))

    def test_two_callables_are_never_the_same_definition(self):
        def scale(x):
            return x * 2

        def shift(x):
            return x + 2

        f, g = (lambda x: x * 2), (lambda x: x + 2)
        names = [fusebench._subject_of(h) for h in (scale, shift, f, g)]
        self.assertEqual(len({h for _, h in names}), 4, names)
        self.assertTrue(names[0][0].endswith("scale"), names[0])
        # The same callable is named the same every time.
        self.assertEqual(fusebench._subject_of(scale), names[0])

        class Fusion:
            def __init__(self, text):
                self.text = text

            def __repr__(self):
                return f"Fusion({self.text})"

            def execute(self, inputs):
                return inputs

        a, b = Fusion("add"), Fusion("mul")
        ha, hb = fusebench._subject_of(a.execute)[1], fusebench._subject_of(b.execute)[1]
        self.assertNotEqual(ha, hb, "methods bound to different objects")
        self.assertEqual(ha, fusebench._subject_of(Fusion("add").execute)[1], "same repr, same definition")
        # Objects that only print their address are told apart by identity.
        o1, o2 = object(), object()
        self.assertNotEqual(fusebench._subject_of(o1.__eq__)[1], fusebench._subject_of(o2.__eq__)[1])
        # A definition given by the caller names it instead.
        self.assertEqual(
            fusebench._subject_of(scale, definition="rmsnorm v2")[1],
            fusebench._subject_of(shift, definition="rmsnorm v2")[1],
        )

    def test_records_read_and_explain(self):
        cold, warm = record("b1-cold"), record("b1-warm")
        self.assertAlmostEqual(cold.median, 6.85, delta=0.05)
        lo, hi = cold.ci
        self.assertLessEqual(lo, cold.median)
        self.assertLessEqual(cold.median, hi)
        self.assertEqual(cold.n, len(cold.samples))
        self.assertEqual(cold.cache, "cold")
        self.assertEqual(cold.method, "cupti")
        self.assertEqual(cold.kernels[0]["grid"], [512, 1, 1])
        self.assertIn("us [", repr(cold))
        e = fusebench.explain(cold, warm)
        self.assertEqual(e.causes[0], "working set vs L2 size")
        self.assertTrue(e.beyond_noise)
        self.assertIn("Most likely cause", str(e))
        self.assertIn("Most likely cause: working set vs L2 size", e.answer)
        self.assertAlmostEqual(e.difference_us, warm.median - cold.median)
        self.assertEqual(e.shares[0][0], "working set vs L2 size")
        self.assertGreater(e.shares[0][1], 0.5)
        self.assertTrue(fusebench.explain(cold, cold).answer.startswith("Same"))
        again = fusebench.Measurement.from_json(cold.to_json())
        self.assertEqual(again.samples, cold.samples)
        with self.assertRaises(ValueError):
            fusebench.Measurement.from_json('{"schema": 99}')


try:
    import numpy
except ImportError:  # the DLPack reader is then tested on the GPU machine only
    numpy = None


@unittest.skipIf(numpy is None, "numpy is not installed")
class DLPackReader(unittest.TestCase):
    def test_layouts_are_read_as_the_producer_gives_them(self):
        a = numpy.arange(24, dtype=numpy.float32).reshape(2, 3, 4)
        self.assertEqual(fusebench._dlpack_layout(a), (1, 0, "float32", [2, 3, 4], [12, 4, 1]))
        t = a.transpose(2, 0, 1)
        self.assertEqual(fusebench._dlpack_layout(t), (1, 0, "float32", [4, 2, 3], [1, 12, 4]))
        i = numpy.zeros((5,), dtype=numpy.int64)
        self.assertEqual(fusebench._dlpack_layout(i)[2:], ("int64", [5], [1]))
        self.assertEqual(fusebench._dlpack_layout(numpy.zeros(3, dtype=bool))[2], "bool")
        self.assertEqual(fusebench._dlpack_layout(numpy.zeros(3, dtype=numpy.float16))[2], "float16")
        with self.assertRaises(Exception):
            fusebench._dlpack_layout(3.0)

    def test_the_writer_hands_memory_to_a_consumer_and_keeps_it_alive(self):
        a = numpy.arange(24, dtype=numpy.float32).reshape(2, 3, 4).transpose(2, 0, 1)
        e = fusebench._dlpack_reexport(a)
        self.assertEqual(e.__dlpack_device__(), (1, 0))
        b = numpy.from_dlpack(e)
        self.assertEqual(b.shape, (4, 2, 3))
        self.assertTrue(numpy.array_equal(a, b))
        self.assertEqual(b.ctypes.data, a.ctypes.data, "the same memory, not a copy")
        del a, e
        import gc

        gc.collect()
        # b still holds the memory through the exported tensor's owner.
        self.assertEqual(float(b[3, 1, 2]), 23.0)
        # A capsule never consumed is freed by its own destructor.
        c = fusebench._dlpack_reexport(numpy.ones(3, dtype=numpy.int64))
        cap = c.__dlpack__()
        del cap, c
        gc.collect()


@unittest.skipUnless(HAS_GPU, f"no GPU: {WHY}")
class OnAGpu(unittest.TestCase):
    def test_a_torch_kernel_is_timed(self):
        import torch

        x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        m = fusebench.kernel_time(torch.mul, x, x, bytes=3 * x.numel() * 2, ceiling=True, siblings=True)
        self.assertGreater(m.median, 0)
        self.assertGreaterEqual(len(m.kernels), 1)
        self.assertGreater(m.gbps, 100)
        self.assertIn("mul", m.subject[0])
        # The copy of the same bytes, timed the same way, beside it.
        self.assertGreater(m.ceiling_us, 0)
        self.assertAlmostEqual(m.pct_of_copy, 100 * m.ceiling_us / m.median)
        record = __import__("json").loads(m.to_json())
        self.assertEqual(record["siblings"][0]["cache"], "warm")
        self.assertEqual(record["stopping"]["name"], "noise")
        add = fusebench.kernel_time(torch.add, x, x, stop="samples:5")
        self.assertEqual(add.n, 5)
        self.assertNotEqual(add.subject[1], m.subject[1], "another callable, another definition")

    def test_fusebench_engine_is_timed_and_checked(self):
        path = str(ROOT / "examples" / "seed_rmsnorm_legacy.py")
        f = fusebench.load(path)
        ok, report = f.check(path)
        self.assertTrue(ok, report)
        m = fusebench.kernel_time(f, bytes=f.bytes)
        self.assertEqual([k["name"] for k in m.kernels], [k[0] for k in f.kernels])
        self.assertEqual(m.subject, (f.name, f.definition_hash), "named by its definition")

    def test_torch_tensors_in_and_out_through_dlpack(self):
        import torch

        path = str(ROOT / "examples" / "seed_rmsnorm_legacy.py")
        f = fusebench.load(path)
        x = torch.randn(4, 1024, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
        f(x, w)
        rsqrt, y = (torch.from_dlpack(o) for o in f.outputs())
        xf = x.float()
        want_r = torch.rsqrt((xf * xf).mean(-1) + 1e-5)
        torch.testing.assert_close(rsqrt.reshape(4, 1024), want_r, rtol=1e-5, atol=1e-6)
        want_y = (xf * want_r[..., None] * w.float()).bfloat16()
        torch.testing.assert_close(y, want_y, rtol=1.6e-2, atol=1e-2)
        with self.assertRaises(ValueError):
            f(x.transpose(1, 2).contiguous().transpose(1, 2), w)
        m = fusebench.kernel_time(f, x, w)
        self.assertGreater(m.median, 0)

    def test_its_own_inputs_through_dlpack(self):
        import torch

        path = str(ROOT / "examples" / "seed_rmsnorm_legacy.py")
        f = fusebench.load(path)
        x, w = (torch.from_dlpack(i) for i in f.inputs())
        self.assertEqual((tuple(x.shape), x.dtype), ((4, 1024, 4096), torch.bfloat16))
        self.assertEqual(tuple(w.shape), (4096,))
        f()
        want = torch.from_dlpack(f.outputs()[1]).clone()
        # The same values copied into memory torch allocated give the same outputs.
        f(x.clone(), w.clone())
        torch.testing.assert_close(torch.from_dlpack(f.outputs()[1]), want, rtol=0, atol=0)
        # Other values give others: the inputs are the fusion's, not a copy made once.
        f(x.clone(), w.clone() * 2)
        self.assertFalse(torch.equal(torch.from_dlpack(f.outputs()[1]), want))


if __name__ == "__main__":
    unittest.main()

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

    @unittest.skipIf(HAS_GPU, "a GPU is present")
    def test_load_says_why_it_cannot_run(self):
        with self.assertRaises(fusebench.Unavailable):
            fusebench.load(str(ROOT / "examples" / "seed_rmsnorm_legacy.py"))

    def test_bad_arguments_are_value_errors(self):
        with self.assertRaises(ValueError):
            fusebench.kernel_time(lambda: None, cache="lukewarm")
        with self.assertRaises(ValueError):
            fusebench.load(str(ROOT / "crates" / "cli" / "tests" / "fixtures" / "explain" / "nope.py"))

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
        again = fusebench.Measurement.from_json(cold.to_json())
        self.assertEqual(again.samples, cold.samples)
        with self.assertRaises(ValueError):
            fusebench.Measurement.from_json('{"schema": 99}')


@unittest.skipUnless(HAS_GPU, f"no GPU: {WHY}")
class OnAGpu(unittest.TestCase):
    def test_a_torch_kernel_is_timed(self):
        import torch

        x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        m = fusebench.kernel_time(torch.mul, x, x, bytes=3 * x.numel() * 2)
        self.assertGreater(m.median, 0)
        self.assertGreaterEqual(len(m.kernels), 1)
        self.assertGreater(m.gbps, 100)

    def test_fusebench_engine_is_timed_and_checked(self):
        path = str(ROOT / "examples" / "seed_rmsnorm_legacy.py")
        f = fusebench.load(path)
        ok, report = f.check(path)
        self.assertTrue(ok, report)
        m = fusebench.kernel_time(f, bytes=f.bytes)
        self.assertEqual([k["name"] for k in m.kernels], [k[0] for k in f.kernels])


if __name__ == "__main__":
    unittest.main()

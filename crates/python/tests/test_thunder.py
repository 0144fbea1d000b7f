"""fusebench.thunder's parts that need neither a GPU nor Thunder: finding a fusion's kernels in a step,
listing fusions from traces, the report's order and formats, the saved runner's script handling."""

import json
import types
import unittest

import fusebench.thunder as ft
from fusebench._saved import definition

G, B = [64, 1, 1], [128, 1, 1]


def k(name, us, grid=G, block=B):
    return (name, grid, block, us)


class StepCause(unittest.TestCase):
    def test_within_noise_is_as_saved_cold(self):
        text, share = ft.step_cause(10.05, 8.0, 10.0, 12.0, 0.01)
        self.assertIn("within noise", text)
        self.assertIsNone(share)

    def test_faster_in_the_step_is_placed_between_cold_and_warm(self):
        text, share = ft.step_cause(9.0, 8.0, 10.0, 12.0, 0.01)
        self.assertAlmostEqual(share, 0.5)
        self.assertIn("50% of the way to saved warm", text)
        text, share = ft.step_cause(7.0, 8.0, 10.0, 12.0, 0.01)
        self.assertEqual(share, 1.0)
        self.assertIn("beyond saved warm, which no saved L2 state explains", text)

    def test_slower_in_the_step_is_the_dirty_l2_share(self):
        text, share = ft.step_cause(12.0, 8.0, 10.0, 11.0, 0.01)
        self.assertAlmostEqual(share, 0.5)
        self.assertIn("the other 50%: no saved L2 state explains it", text)
        text, share = ft.step_cause(12.0, 8.0, 10.0, 13.0, 0.01)
        self.assertEqual(share, 1.0)
        self.assertNotIn("no saved L2 state", text)

    def test_a_dirty_l2_that_costs_nothing_is_not_the_cause(self):
        text, share = ft.step_cause(12.0, 8.0, 10.0, 10.05, 0.01)
        self.assertEqual(share, 0.0)
        self.assertIn("no saved L2 state explains it", text)


class OpSummary(unittest.TestCase):
    def test_first_five_distinct_ops_and_the_count(self):
        script = "t2 = fd.ops.cast(t0)\nt3 = fd.ops.add(t2, t1)\nt4 = fd.ops.cast(t3)\n"
        self.assertEqual(ft.op_summary(script), "cast, add (3 ops)")
        many = "".join(f"x = fd.ops.op{i}(y)\n" for i in range(7))
        self.assertEqual(ft.op_summary(many), "op0, op1, op2, op3, op4, ... (7 ops)")


class MatchKernels(unittest.TestCase):
    def test_a_fusion_is_found_past_other_kernels_and_summed(self):
        step = [k("gemm", 50.0), k("nvf_a", 3.0), k("nvf_b", 4.0), k("gemm", 50.0)]
        got = ft.match_kernels(step, [("fwd/nvFusion0", "fwd", [("nvf_a", G, B), ("nvf_b", G, B)])])
        self.assertEqual(got["fwd/nvFusion0"], (7.0, [1, 2]))

    def test_same_names_are_told_apart_by_launch_shape_and_claimed_once(self):
        # nvFuser names every Thunder fusion's kernel alike; the grid tells these apart.
        step = [k("nvf_f0", 2.0, grid=[8, 1, 1]), k("nvf_f0", 5.0, grid=[32, 1, 1]), k("nvf_f0", 2.5, grid=[8, 1, 1])]
        fusions = [
            ("fwd/nvFusion0", "fwd", [("nvf_f0", [8, 1, 1], B)]),
            ("fwd/nvFusion1", "fwd", [("nvf_f0", [32, 1, 1], B)]),
            ("fwd/nvFusion2", "fwd", [("nvf_f0", [8, 1, 1], B)]),
        ]
        got = ft.match_kernels(step, fusions)
        self.assertEqual(got["fwd/nvFusion0"], (2.0, [0]))
        self.assertEqual(got["fwd/nvFusion1"], (5.0, [1]))
        self.assertEqual(got["fwd/nvFusion2"], (2.5, [2]))

    def test_a_trace_is_searched_from_where_it_left_off_then_from_the_start(self):
        # The backward group starts where it is found, independent of the forward one.
        step = [k("a", 1.0), k("b", 2.0), k("a", 3.0)]
        fusions = [("bwd/nvFusion0", "bwd", [("b", G, B)]), ("bwd/nvFusion1", "bwd", [("a", G, B)]),
                   ("fwd/nvFusion0", "fwd", [("a", G, B)])]
        got = ft.match_kernels(step, fusions)
        self.assertEqual(got["bwd/nvFusion1"], (3.0, [2]))
        self.assertEqual(got["fwd/nvFusion0"], (1.0, [0]))

    def test_kernels_not_in_the_step_give_none(self):
        got = ft.match_kernels([k("a", 1.0)], [("fwd/nvFusion0", "fwd", [("a", G, B), ("b", G, B)]),
                                               ("fwd/nvFusion1", "fwd", [])])
        self.assertIsNone(got["fwd/nvFusion0"])
        self.assertIsNone(got["fwd/nvFusion1"])


def bsym(name, wrapper, fusion=True):
    return types.SimpleNamespace(sym=types.SimpleNamespace(name=name, is_fusion=fusion), _call_ctx={name: wrapper})


class FakeThunder:
    def __init__(self, fwd, bwd=None):
        self.fwd, self.bwd = fwd, bwd

    def last_traces(self, fn):
        return [types.SimpleNamespace(bound_symbols=self.fwd[fn])]

    def last_backward_traces(self, fn):
        if self.bwd is None:
            raise RuntimeError("no backward")
        return [types.SimpleNamespace(bound_symbols=self.bwd[fn])]


class ListFusions(unittest.TestCase):
    def test_nvfusions_of_the_forward_and_backward_traces_in_order(self):
        w0, w1, w2 = object(), object(), object()
        fn = "jitted"
        th = FakeThunder({fn: [bsym("nvFusion0", w0), bsym("torch_compile0", None), bsym("nvFusion1", w1)]},
                         {fn: [bsym("nvFusion0", w2), bsym("add", None, fusion=False)]})
        got = ft.nv_fusions(th, fn)
        self.assertEqual([(key, group) for key, group, _ in got],
                         [("fwd/nvFusion0", "fwd"), ("fwd/nvFusion1", "fwd"), ("bwd/nvFusion0", "bwd")])
        self.assertIs(got[2][2], w2)

    def test_thunderfx_subgraphs_are_keyed_by_where_they_sit(self):
        backend = types.SimpleNamespace(subgraph_infos=[types.SimpleNamespace(thunder_compiled_fns=["a", "b"]),
                                                        types.SimpleNamespace(thunder_compiled_fns=["c"])])
        compiled = types.SimpleNamespace(_backend=backend)
        self.assertEqual(ft.compiled_functions(compiled), [("g0.f0/", "a"), ("g0.f1/", "b"), ("g1.f0/", "c")])
        th = FakeThunder({"a": [bsym("nvFusion0", 1)], "b": [], "c": [bsym("nvFusion0", 2)]})
        self.assertEqual([key for key, _, _ in ft.nv_fusions(th, compiled)], ["g0.f0/fwd/nvFusion0", "g1.f0/fwd/nvFusion0"])


class TheReport(unittest.TestCase):
    def rows(self):
        base = {"kernels": 1, "online_cold_us": 10.0, "online_warm_us": 8.0, "saved_cold_us": 10.0,
                "saved_warm_us": 8.0, "saved_vs_online_cold": 1.0, "peak_mib_alone": 12.0, "cause": "noise"}
        return [dict(base, key="fwd/nvFusion0", in_step_us=10.1, in_step_vs_saved_cold=1.01, in_step_differs=False),
                dict(base, key="fwd/nvFusion1", in_step_us=6.0, in_step_vs_saved_cold=0.6, in_step_differs=True),
                dict(base, key="bwd/nvFusion0", in_step_us=None, in_step_vs_saved_cold=None, in_step_differs=False)]

    def test_fusions_that_differ_in_the_step_come_first(self):
        r = ft.Report(self.rows(), {"median_us": 100.0, "kernels": 9, "fusion_us": 16.1, "peak_mib": 300.0})
        self.assertEqual([x["key"] for x in r.rows], ["fwd/nvFusion1", "fwd/nvFusion0", "bwd/nvFusion0"])

    def test_text_markdown_and_json_say_the_same(self):
        r = ft.Report(self.rows(), {"median_us": 100.0, "kernels": 9, "fusion_us": 16.1, "peak_mib": 300.0},
                      ["bwd/nvFusion0: its 1 kernels were not found as one run in the step's 9"])
        text, md = str(r), r.to_markdown()
        for t in (text, md):
            self.assertIn("fwd/nvFusion1", t)
            self.assertIn("0.600", t)
            self.assertIn("step: 100.00 us of kernels per step (9 kernels, 16.10 us in the 3 nvFusions)", t)
            self.assertIn("note: bwd/nvFusion0", t)
        self.assertEqual(md.splitlines()[0].count("|"), len(ft.Report.COLUMNS) + 1)
        doc = json.loads(r.to_json())
        self.assertEqual(doc["fusions"][0]["key"], "fwd/nvFusion1")
        self.assertEqual(doc["step"]["kernels"], 9)


class TheCause(unittest.TestCase):
    def test_explains_most_likely_cause_or_its_verdict(self):
        import pathlib

        import fusebench

        fx = pathlib.Path(__file__).resolve().parents[3] / "crates" / "measure" / "tests" / "fixtures" / "explain"
        rec = lambda n: fusebench.Measurement.from_json((fx / f"{n}.json").read_text())
        cause = ft.first_cause(fusebench.explain(rec("b1-cold"), rec("b1-warm")))
        self.assertTrue(cause.startswith("working set vs L2 size"), cause)
        same = ft.first_cause(fusebench.explain(rec("seed-cold-1"), rec("seed-cold-2")))
        self.assertTrue(same, same)


class SavedRunner(unittest.TestCase):
    def test_the_definition_leaves_out_the_execute_call(self):
        script = "import torch\nwith FusionDefinition() as fd:\n    nvfuser_fusion(fd)\ninputs = [1]\nfd.execute(inputs)\n"
        self.assertEqual(definition(script), "import torch\nwith FusionDefinition() as fd:\n    nvfuser_fusion(fd)\ninputs = [1]\n")


if __name__ == "__main__":
    unittest.main()

"""Unit tests of the evaluation worker's pure parts (tools/kbrl_eval/): the time-coverage summary
of a profile and the output comparison. No GPU, no processes: profiler events are stand-ins with
the fields the summary reads.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import coverage  # noqa: E402


def cpu_event(name, parent=None, kernels=()):
    return types.SimpleNamespace(name=name, device_type="DeviceType.CPU", cpu_parent=parent,
                                 kernels=[types.SimpleNamespace(name=k, duration=us)
                                          for k, us in kernels],
                                 time_range=types.SimpleNamespace(start=0, end=0))


def device_event(name, us):
    return types.SimpleNamespace(name=name, device_type="DeviceType.CUDA", cpu_parent=None,
                                 kernels=[], time_range=types.SimpleNamespace(start=10, end=10 + us))


class TimeCoverage(unittest.TestCase):
    def test_a_gemm_by_torch_and_an_own_epilogue_kernel(self):
        # level-2 style: torch's GEMM (linked to aten::mm) and the candidate's fused epilogue,
        # launched outside every operator, so linked to nothing
        mm = cpu_event("aten::mm", kernels=[("sm90_gemm", 30.0)])
        events = [cpu_event("aten::linear"), mm, cpu_event("aten::empty_like"),
                  device_event("sm90_gemm", 30.0), device_event("relu_scale_kernel", 10.0)]
        got = coverage.summarize(events, own_names=["relu_scale_kernel"])
        self.assertEqual(got["coverage_method"], "launch links")
        self.assertAlmostEqual(got["time_coverage"], 0.25)
        self.assertEqual(got["own_kernel_count"], 1)
        own = [k for k in got["kernels"] if k["own"]]
        self.assertEqual([k["name"] for k in own], ["relu_scale_kernel"])

    def test_an_aten_call_from_the_candidates_cpp_is_torchs(self):
        # the launch's CPU event sits under an aten:: operator several levels up
        op = cpu_event("aten::addmm")
        inner = cpu_event("cublasLt::matmul", parent=op, kernels=[("sm90_gemm", 50.0)])
        events = [op, inner, device_event("sm90_gemm", 50.0)]
        got = coverage.summarize(events, own_names=[])
        self.assertEqual(got["time_coverage"], 0.0)
        self.assertEqual(got["own_kernel_count"], 0)

    def test_only_own_kernels_and_no_links_go_by_declared_names(self):
        events = [cpu_event("aten::empty_like"), device_event("void relu_kernel<float>(float*)", 5.0),
                  device_event("elementwise_kernel_from_torch", 5.0)]
        got = coverage.summarize(events, own_names=["relu_kernel"])
        self.assertEqual(got["coverage_method"], "names")
        self.assertAlmostEqual(got["time_coverage"], 0.5)

    def test_torch_compile_kernels_are_never_own(self):
        mm = cpu_event("aten::mm", kernels=[("gemm", 10.0)])
        events = [mm, device_event("gemm", 10.0), device_event("triton_poi_fused_relu_0", 10.0)]
        got = coverage.summarize(events, own_names=[])
        self.assertEqual(got["time_coverage"], 0.0)

    def test_a_tiny_own_kernel_is_listed_beside_many_big_ones(self):
        events, ops = [], []
        for i in range(12):
            ops.append(cpu_event("aten::op%d" % i, kernels=[("torch_kernel_%d" % i, 100.0)]))
            events.append(device_event("torch_kernel_%d" % i, 100.0))
        events += ops + [device_event("token_kernel", 0.5)]
        got = coverage.summarize(events, own_names=["token_kernel"])
        self.assertEqual(len(got["kernels"]), 8)
        self.assertTrue(any(k["own"] and k["name"] == "token_kernel" for k in got["kernels"]))
        self.assertEqual(got["own_kernel_count"], 1)
        self.assertLess(got["time_coverage"], 0.001)

    def test_the_same_kernel_name_from_torch_and_from_the_candidate(self):
        # torch launched it once (linked), the candidate once more (unlinked): one each
        mm = cpu_event("aten::mm", kernels=[("gemm", 10.0)])
        events = [mm, device_event("gemm", 10.0), device_event("gemm", 30.0)]
        got = coverage.summarize(events, own_names=[])
        self.assertEqual(got["own_kernel_count"], 1)
        self.assertEqual(sorted((k["name"], k["own"]) for k in got["kernels"]),
                         [("gemm", False), ("gemm", True)])

    def test_declared_kernel_names(self):
        src = ('__global__ void __launch_bounds__(256) fused_kernel(float* x) {}\n'
               '@triton.jit\ndef add_kernel(x_ptr, n):\n    pass\n')
        self.assertEqual(coverage.own_kernel_names(src), ["add_kernel", "fused_kernel"])


class Comparison(unittest.TestCase):
    def setUp(self):
        import torch
        self.torch = torch
        from kbrl_eval.compare import OutputComparison, strict_tolerances
        self.compare = OutputComparison
        self.tol = strict_tolerances("fp32")

    def verdict(self, ref, got):
        c = self.compare(ref, got, 1e-4, 1e-4, self.tol)
        return c.strict_ok, c.kernelbench_ok

    def test_tiny_outputs_zeros_fail_strict_pass_kernelbench(self):
        torch = self.torch
        # rows of 65536 near-equal logits: every output is about 1.5e-5, far below 1e-4
        ref = torch.softmax(torch.rand(4, 65536, generator=torch.Generator().manual_seed(0)), 1)
        self.assertEqual(self.verdict(ref, torch.zeros_like(ref)), (False, True))
        self.assertEqual(self.verdict(ref, ref * 1.001), (False, True))
        self.assertEqual(self.verdict(ref, ref.double().float()), (True, True))

    def test_large_sums_in_another_order_stay_correct(self):
        torch = self.torch
        x = torch.rand(64, 200000, generator=torch.Generator().manual_seed(1)) * 2.0
        ref = x.sum(1)
        other = x.double().sum(1).float()  # float64 accumulation: differs in the last bits
        self.assertGreater(float(ref.abs().max()), 1e5)
        self.assertEqual(self.verdict(ref, other), (True, True))


class SpareCount(unittest.TestCase):
    """KBRL_EVAL_SPARES: a usable value is taken; anything else says what was kept."""

    def setUp(self):
        from kbrl_eval.worker import spares_wanted
        self.spares_wanted = spares_wanted

    def test_unset_or_empty_keeps_four_quietly(self):
        self.assertEqual(self.spares_wanted(None), (4, None))
        self.assertEqual(self.spares_wanted(" "), (4, None))

    def test_a_whole_number_in_range_is_taken(self):
        self.assertEqual(self.spares_wanted("6"), (6, None))

    def test_garbage_keeps_four_and_says_so(self):
        count, problem = self.spares_wanted("four")
        self.assertEqual(count, 4)
        self.assertIn("'four' is not a whole number", problem)

    def test_out_of_range_is_clamped_and_said(self):
        count, problem = self.spares_wanted("0")
        self.assertEqual(count, 1)
        self.assertIn("outside 1-16; keeping 1", problem)
        self.assertEqual(self.spares_wanted("99")[0], 16)


class BuildNice(unittest.TestCase):
    """KBRL_EVAL_BUILD_NICE: builds ahead run at niceness 10 unless told otherwise, 0-19."""

    def test_default_and_values(self):
        from kbrl_eval.worker import build_nice_wanted
        self.assertEqual(build_nice_wanted(None), (10, None))
        self.assertEqual(build_nice_wanted("0"), (0, None))
        value, problem = build_nice_wanted("25")
        self.assertEqual(value, 19)
        self.assertIn("KBRL_EVAL_BUILD_NICE=25 is outside 0-19", problem)
        value, problem = build_nice_wanted("low")
        self.assertEqual(value, 10)
        self.assertIn("not a whole number", problem)


if __name__ == "__main__":
    unittest.main()

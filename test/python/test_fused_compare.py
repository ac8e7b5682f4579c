"""The GPU's fused comparison (tools/kbrl_eval/fused_compare.py) counts exactly the elements
torch.isclose finds not close, for KernelBench's tolerance in the output's own dtype and for the
strict test on the widened values, on outputs built to sit on those tolerances' edges; reads
every element however the grid strides over it; hands NaN, infinities and overflowing
differences back to the chunked path; and gives compare.py the same verdicts and figures as
the chunked path (sums to 1e-12). The kernels run only on a CUDA device: without one, only the
refusal of CPU tensors is checked.

    python3 -m unittest discover -s test/python -p test_fused_compare.py"""

import math
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import compare, fused_compare  # noqa: E402

HAVE_CUDA = torch.cuda.is_available()
DTYPES = ((torch.float32, "fp32"), (torch.bfloat16, "bf16"), (torch.float16, "fp16"))


class CpuTensorsTakeTheChunkedPath(unittest.TestCase):
    def test_cpu_tensors_are_refused(self):
        a = torch.ones(10)
        self.assertFalse(fused_compare.applies(a, a.clone()))
        self.assertIsNone(fused_compare.figures(a, a.clone(), 1e-4, 1e-4, 1e-4, 1e-4))
        c = compare.OutputComparison(a, a.clone(), 1e-4, 1e-4, compare.strict_tolerances("fp32"))
        self.assertEqual(c.path, "chunked")
        ints = torch.arange(10)
        self.assertEqual(compare.OutputComparison(ints, ints.clone(), 1e-4, 1e-4,
                                                  compare.strict_tolerances("fp32")).path, "exact")


@unittest.skipUnless(HAVE_CUDA, "the fused comparison runs on a CUDA device")
class FusedCountsAreTorchs(unittest.TestCase):
    def setUp(self):
        self.gen = torch.Generator(device="cuda").manual_seed(20261129)
        self.assertTrue(fused_compare.enabled(), "fused comparison off: %s" % (
            fused_compare._disabled,))

    def rand(self, n):
        return torch.rand(n, generator=self.gen, device="cuda", dtype=torch.float64) * 8 - 4

    def edge_pair(self, n, dtype, atol, rtol):
        """(expected, got) whose differences sit around atol + |rtol * got|: factors from 0.98
        to 1.02 of the bound, then rounded to the dtype, so that many land on either side."""
        got = self.rand(n).to(dtype)
        g = got.to(torch.float64)
        factor = 0.98 + 0.04 * torch.rand(n, generator=self.gen, device="cuda",
                                          dtype=torch.float64)
        sign = torch.where(torch.rand(n, generator=self.gen, device="cuda") < 0.5, -1.0, 1.0)
        expected = (g + sign * factor * (atol + (rtol * g).abs())).to(dtype)
        return expected.contiguous(), got.contiguous()

    def test_kernelbench_and_strict_counts_equal_isclose(self):
        for dtype, precision in DTYPES:
            tol = compare.DEFAULT_TOLERANCE[precision]
            strict = compare.strict_tolerances(precision)
            for n in (1, 1000, 300001):
                e, g = self.edge_pair(n, dtype, tol, tol)
                f = fused_compare.figures(e, g, tol, tol, strict["rtol"], strict["floor"])
                self.assertTrue(f is not None and f.usable, (dtype, n))
                kb_not_close = int((~torch.isclose(e, g, rtol=tol, atol=tol)).sum())
                self.assertEqual(f.kernelbench_failures, kb_not_close, (dtype, n))
                ew, gw = e.to(torch.float32), g.to(torch.float32)
                scale = float(ew.abs().max())
                self.assertEqual(f.scale, scale, (dtype, n))
                strict_not_close = int((~torch.isclose(
                    ew, gw, rtol=strict["rtol"], atol=strict["floor"] * scale)).sum())
                self.assertEqual(f.strict_failures, strict_not_close, (dtype, n))
                if n > 1000:  # the data must straddle both edges, or the test shows nothing
                    self.assertTrue(0 < kb_not_close < n, (dtype, kb_not_close))

    def test_figures_equal_torchs(self):
        for dtype, _ in DTYPES:
            e = self.rand(123457).to(dtype)
            g = (e.to(torch.float64) + self.rand(123457) * 1e-3).to(dtype)
            f = fused_compare.figures(e, g, 1e-4, 1e-4, 1e-4, 1e-4)
            ew, gw = e.to(torch.float32), g.to(torch.float32)
            d = (ew - gw).abs()
            self.assertEqual((f.ref_lo, f.ref_hi), (float(ew.min()), float(ew.max())))
            self.assertEqual((f.got_lo, f.got_hi), (float(gw.min()), float(gw.max())))
            self.assertEqual(f.diff_max, float(d.max()))
            for mine, theirs in ((f.diff_sum, d.sum(dtype=torch.float64)),
                                 (f.diff_sq, (d.to(torch.float64) ** 2).sum()),
                                 (f.ref_sq, (ew.to(torch.float64) ** 2).sum())):
                self.assertTrue(math.isclose(mine, float(theirs), rel_tol=1e-12), (mine, theirs))
            again = fused_compare.figures(e, g, 1e-4, 1e-4, 1e-4, 1e-4)
            self.assertEqual(vars(again), vars(f))  # the same order every time

    def test_every_element_is_read(self):
        # more elements than one round of the grid covers, and a ragged tail
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        n = fused_compare.BLOCKS_PER_SM * sms * fused_compare.THREADS * fused_compare.UNROLL * 2
        n += 123
        e = torch.ones(n, device="cuda")
        for wrong in ((0,), (n - 1,), (n // 2, n - 7)):
            g = e.clone()
            g[list(wrong)] = 2.0
            f = fused_compare.figures(e, g, 1e-4, 1e-4, 1e-4, 1e-4)
            self.assertEqual(f.strict_failures, len(wrong))
            self.assertEqual(f.kernelbench_failures, len(wrong))
            self.assertEqual(f.diff_sum, float(len(wrong)))

    def test_nonfinite_values_go_back_to_the_chunked_path(self):
        e = self.rand(5000).float()
        for where, value, side in ((10, float("nan"), "expected"), (4999, float("inf"), "got"),
                                   (77, float("-inf"), "expected")):
            a, b = e.clone(), e.clone()
            (a if side == "expected" else b)[where] = value
            self.assertFalse(fused_compare.figures(a, b, 1e-4, 1e-4, 1e-4, 1e-4).usable)
            c = compare.OutputComparison(a, b, 1e-4, 1e-4, compare.strict_tolerances("fp32"))
            self.assertEqual(c.path, "chunked")
        a, b = e.clone(), e.clone()
        a[3], b[3] = 3e38, -3e38  # finite values whose difference overflows float32
        self.assertFalse(fused_compare.figures(a, b, 1e-4, 1e-4, 1e-4, 1e-4).usable)

    def test_other_tensors_are_not_taken(self):
        e = self.rand(64).float()
        self.assertFalse(fused_compare.applies(e.double(), e.double()))
        self.assertFalse(fused_compare.applies(e.reshape(8, 8).t(), e.reshape(8, 8).t()))
        z = torch.complex(e, e)
        self.assertFalse(fused_compare.applies(z, z))

    def test_compare_gives_the_chunked_paths_verdicts(self):
        cases = []
        for dtype, precision in DTYPES:
            e, g = self.edge_pair(200003, dtype, 1e-4, 1e-4)
            cases.append((e, g, precision))
            cases.append((e, e.clone(), precision))
            cases.append((e, torch.zeros_like(e), precision))
            cases.append((e, g.mul(1.0 + 1e-3), precision))
        for e, g, precision in cases:
            tol = compare.DEFAULT_TOLERANCE[precision]
            strict = compare.strict_tolerances(precision)
            fused = compare.OutputComparison(e, g, tol, tol, strict)
            os.environ["KBRL_EVAL_FUSED_COMPARE"] = "0"
            try:
                chunked = compare.OutputComparison(e, g, tol, tol, strict)
            finally:
                del os.environ["KBRL_EVAL_FUSED_COMPARE"]
            what = (e.dtype, fused.note, chunked.note)
            self.assertEqual((fused.path, chunked.path), ("fused", "chunked"))
            self.assertEqual((fused.strict_ok, fused.kernelbench_ok, fused.flags),
                             (chunked.strict_ok, chunked.kernelbench_ok, chunked.flags), what)
            self.assertEqual((fused.max_abs_diff, fused.max_rel_diff),
                             (chunked.max_abs_diff, chunked.max_rel_diff), what)
            for a, b in ((fused.mean_abs_diff, chunked.mean_abs_diff),
                         (fused.norm_rel_diff, chunked.norm_rel_diff)):
                self.assertTrue(math.isclose(a, b, rel_tol=1e-12), (a, b, what))


if __name__ == "__main__":
    unittest.main()

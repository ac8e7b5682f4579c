"""The output comparison (tools/kbrl_eval/compare.py) gives the same verdicts and figures as a
plain two-pass comparison written here as the oracle: every chunk's statistics in the first pass,
then torch.allclose over every chunk with the final scale. compare.py takes one pass for chunks
whose values are all finite and tests only the chunks that did not clear the scale seen so far
again; this checks that nothing changes by it, over many chunks (COMPARE_CHUNK made small),
values at the tolerance's edge, NaN and infinities where the reference has them and where it
does not, differences that overflow, constant outputs, and each floating dtype. Complex outputs
are compared as their real and imaginary parts (a wrong imaginary part fails). KernelBench's
verdict, taken in the same pass, must equal one torch.allclose over the whole output.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)

KBRL_COMPARE_TEST_DEVICE=cuda runs the same cases on the GPU (its kernels, the same oracle): there
float32, bfloat16 and float16 outputs take fused_compare.py's two passes, whose float64 sums
may differ from the oracle's in the last bits (test_fused_compare.py checks its counts)."""

import math
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval import compare, fused_compare  # noqa: E402

CHUNK = 1000  # elements per chunk in these tests: most outputs here span several


def oracle_pairs(a, b):
    a, b = a.reshape(-1), b.reshape(-1)
    for start in range(0, a.numel(), CHUNK):
        yield a[start:start + CHUNK], b[start:start + CHUNK]


def oracle_wide(t):
    if t.dtype in (torch.float64, torch.complex128):
        return t
    return t.to(torch.complex64) if t.is_complex() else t.to(torch.float32)


def oracle_real(t):
    return torch.view_as_real(t) if t.is_complex() else t


def oracle(expected, got, tol):
    """(strict ok, nonfinite mismatch, degenerate, max abs diff, mean abs diff, norm rel diff,
    scale) as a plain two-pass comparison computes them."""
    scale, ref_lo, ref_hi, got_lo, got_hi = 0.0, math.inf, -math.inf, math.inf, -math.inf
    ref_sq = diff_sq = diff_sum = diff_max = 0.0
    mismatch = False
    for e, g in oracle_pairs(expected, got):
        e, g = oracle_real(oracle_wide(e)), oracle_real(oracle_wide(g))
        e_fin, g_fin = torch.isfinite(e), torch.isfinite(g)
        if not torch.equal(e_fin, g_fin):
            mismatch = True
        elif not bool(e_fin.all()):
            same = (e == g) | (torch.isnan(e) & torch.isnan(g)) | e_fin
            mismatch |= not bool(same.all())
        e = torch.where(e_fin, e, torch.zeros_like(e))
        g = torch.where(g_fin, g, torch.zeros_like(g))
        scale = max(scale, float(e.abs().max()))
        ref_lo, ref_hi = min(ref_lo, float(e.min())), max(ref_hi, float(e.max()))
        got_lo, got_hi = min(got_lo, float(g.min())), max(got_hi, float(g.max()))
        d = (e - g).abs()
        diff_max = max(diff_max, float(d.max()))
        diff_sum += float(d.sum(dtype=torch.float64))
        diff_sq += float((d.to(torch.float64) ** 2).sum())
        ref_sq += float((e.to(torch.float64) ** 2).sum())
    n = expected.numel()
    ref_norm = math.sqrt(ref_sq)
    norm_rel = math.sqrt(diff_sq) / ref_norm if ref_norm > 0 else (0.0 if diff_sq == 0 else math.inf)
    floor = tol["floor"] * scale
    elementwise = all(torch.allclose(oracle_real(oracle_wide(e)), oracle_real(oracle_wide(g)),
                                     atol=floor, rtol=tol["rtol"], equal_nan=True)
                      for e, g in oracle_pairs(expected, got))
    band = tol["rtol"] * scale + floor
    degenerate = got_lo == got_hi and (ref_hi - ref_lo) > 2 * band and n > 1
    ok = (not mismatch) and elementwise and norm_rel <= tol["norm_tol"] and not degenerate
    return ok, mismatch, degenerate, diff_max, diff_sum / n, norm_rel, scale


class SamePassesAsTheOracle(unittest.TestCase):
    def setUp(self):
        self.saved = compare.COMPARE_CHUNK
        compare.COMPARE_CHUNK = CHUNK
        self.generator = torch.Generator().manual_seed(20261129)
        self.device = torch.device(os.environ.get("KBRL_COMPARE_TEST_DEVICE", "cpu"))

    def tearDown(self):
        compare.COMPARE_CHUNK = self.saved

    def rand(self, n, dtype=torch.float32):
        values = torch.rand(n, generator=self.generator, dtype=torch.float64) * 4 - 2
        return values.to(device=self.device, dtype=dtype)

    def check(self, expected, got, precision="fp32", what=""):
        tol = compare.strict_tolerances(precision)
        kb_tol = compare.DEFAULT_TOLERANCE[precision]
        c = compare.OutputComparison(expected, got, kb_tol, kb_tol, tol)
        ok, mismatch, degenerate, d_max, d_mean, norm_rel, _ = oracle(expected, got, tol)
        # KernelBench's verdict: one torch.allclose over the whole output
        self.assertEqual(c.kernelbench_ok,
                         torch.allclose(expected, got, atol=kb_tol, rtol=kb_tol), what)
        self.assertEqual(c.strict_ok, ok, what)
        self.assertEqual("nonfinite_output" in c.flags, mismatch, what)
        self.assertEqual("degenerate_output" in c.flags, degenerate and not mismatch, what)
        # on the GPU's fused path (fused_compare.py) the float64 sums run in another order
        sums_rel = 1e-12 if fused_compare.applies(expected, got) else 0.0
        for mine, theirs, rel in ((c.max_abs_diff, d_max, 0.0),
                                  (c.mean_abs_diff, d_mean, sums_rel),
                                  (c.norm_rel_diff, norm_rel, sums_rel)):
            self.assertTrue(mine == theirs or (math.isnan(mine) and math.isnan(theirs))
                            or math.isclose(mine, theirs, rel_tol=rel, abs_tol=0.0) and rel > 0,
                            "%s: %r against %r" % (what, mine, theirs))
        return c.strict_ok

    def test_honest_and_wrong_outputs_in_every_dtype(self):
        for dtype, precision in ((torch.float32, "fp32"), (torch.float64, "fp32"),
                                 (torch.bfloat16, "bf16"), (torch.float16, "fp16")):
            ref = self.rand(5500, dtype)
            self.assertTrue(self.check(ref, ref.clone(), precision, "%s equal" % dtype))
            noise = (self.rand(5500) * 1e-6).to(dtype)
            self.check(ref, ref + noise, precision, "%s small noise" % dtype)
            wrong = ref.clone()
            wrong[4321] += 0.5
            self.assertFalse(self.check(ref, wrong, precision, "%s one wrong value" % dtype))

    def test_values_at_the_tolerance_edge(self):
        # The reference's largest magnitude (positive or negative) lies in the fifth chunk:
        # a value off in the first chunk is tested there against a smaller scale than the final
        # one (and must be tested again), a value off after it against the final scale. One
        # value off by about the floor leaves the norm within its tolerance, so the elementwise
        # test alone decides.
        tol = compare.strict_tolerances("fp32")
        final_floor = tol["floor"] * 100.0
        verdicts = set()
        for sign in (1.0, -1.0):
            ref = self.rand(4500)
            ref[4400] = 100.0 * sign
            for at in (10, 4400, 4450):
                if at != 4400:
                    ref[at] = 0.0  # so the relative term adds nothing to the floor there
                for fraction in (0.5, 0.999, 1.0, 1.001, 1.005, 2.0):
                    got = ref.clone()
                    got[at] = ref[at] + final_floor * fraction
                    verdicts.add(self.check(ref, got, "fp32", "sign %g, value %d off by %g of "
                                            "the final floor" % (sign, at, fraction)))
        self.assertEqual(verdicts, {True, False})  # the cases straddle the edge

    def test_kernelbench_verdict_at_its_own_edge(self):
        # KernelBench's tolerance is absolute: a value off by about atol passes or fails it in
        # whichever chunk it lies, with or without NaN elsewhere (NaN chunks take allclose)
        verdicts = set()
        for dtype in (torch.float32, torch.float64):
            for nan_at in (None, 2500):
                ref = self.rand(4500, dtype)
                if nan_at is not None:
                    ref[nan_at] = float("nan")
                for at in (10, 3999):
                    for fraction in (0.5, 0.999, 1.0, 1.001, 2.0):
                        # the candidate's value is 0, so the relative term adds nothing and a
                        # difference of exactly atol meets its bound with equality
                        expected, got = ref.clone(), ref.clone()
                        expected[at], got[at] = 1e-4 * fraction, 0.0
                        c = compare.OutputComparison(expected, got, 1e-4, 1e-4,
                                                     compare.strict_tolerances("fp32"))
                        verdicts.add(c.kernelbench_ok)
                        self.check(expected, got, "fp32", "%s, NaN at %s, value %d off by %g "
                                   "of atol" % (dtype, nan_at, at, fraction))
        self.assertEqual(verdicts, {True, False})

    def test_kernelbench_verdict_with_equal_infinities(self):
        # allclose counts equal infinities as close; |inf - inf| is NaN, so such a chunk must
        # not take the fast path
        ref = self.rand(2500)
        ref[1200], ref[1300] = float("inf"), float("-inf")
        self.check(ref, ref.clone(), "fp32", "equal infinities, no NaN")
        c = compare.OutputComparison(ref, ref.clone(), 1e-4, 1e-4,
                                     compare.strict_tolerances("fp32"))
        self.assertTrue(c.kernelbench_ok)

    def test_nan_and_infinities(self):
        ref = self.rand(3200)
        ref[5], ref[1500], ref[3100] = float("nan"), float("inf"), float("-inf")
        self.assertTrue(self.check(ref, ref.clone(), "fp32", "where the reference has them"))
        got = ref.clone()
        got[1500] = float("-inf")
        self.assertFalse(self.check(ref, got, "fp32", "an infinity of the other sign"))
        got = ref.clone()
        got[2000] = float("nan")
        self.assertFalse(self.check(ref, got, "fp32", "NaN where the reference is finite"))
        got = ref.clone()
        got[5] = 0.0
        self.assertFalse(self.check(ref, got, "fp32", "finite where the reference is NaN"))

    def test_a_difference_that_overflows(self):
        ref = self.rand(2500)
        ref[1200] = 3e38
        got = ref.clone()
        got[1200] = -3e38  # both finite; their difference is not, in float32
        self.assertFalse(self.check(ref, got, "fp32", "overflowing difference"))

    def test_constant_outputs(self):
        ref = self.rand(3000)
        self.assertFalse(self.check(ref, torch.zeros_like(ref), "fp32", "zeros"))
        two_and_a_half = torch.full((3000,), 2.5, device=self.device)
        zeros = torch.zeros(3000, device=self.device)
        self.check(two_and_a_half, two_and_a_half.clone(), "fp32", "both constant")
        self.check(zeros, zeros.clone(), "fp32", "both zero")

    def test_complex_outputs_compare_both_parts(self):
        ref = torch.complex(self.rand(2100), self.rand(2100))
        self.assertTrue(self.check(ref, ref.clone(), "fp32", "complex equal"))
        wrong_imaginary = torch.complex(ref.real, ref.imag + 1.0)
        self.assertFalse(self.check(ref, wrong_imaginary, "fp32", "complex, imaginary part off"))
        c = compare.OutputComparison(ref, wrong_imaginary, 1e-4, 1e-4,
                                     compare.strict_tolerances("fp32"))
        self.assertFalse(c.strict_ok)
        self.assertAlmostEqual(c.max_abs_diff, 1.0, places=5)


if __name__ == "__main__":
    unittest.main()

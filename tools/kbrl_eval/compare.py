"""Output comparison in the trusted process: KernelBench's verdict and kbrl's strict one.

KernelBench's verdict (kept exactly, reported as `kernelbench_passed`):
    same shape, then torch.allclose(reference, candidate, atol=tol, rtol=tol), tol 1e-4 for
    fp32 and 1e-2 for fp16/bf16 (equality for bool outputs).
Its absolute tolerance ignores the output's magnitude: an output whose every value is far below
1e-4 (a softmax over long rows) passes as all zeros, as a constant, or scaled by 1.001.

The strict verdict (what `passed` and `correct` mean) measures the error against the magnitude
of the reference output. With scale = max |reference| over the output (finite values):
  1. elementwise: |candidate - reference| <= rtol * |candidate| + floor * scale
     (torch.allclose(reference, candidate) with an absolute tolerance that scales with the
     output; the relative term is allclose's, which KernelBench calls the same way);
  2. norm-wise:   norm(candidate - reference) <= norm_tol * norm(reference);
  3. non-finite values: NaN and infinities must be where the reference has them (same sign);
  4. degenerate outputs: a constant output (all zeros included) fails where the reference's
     values spread further than twice the elementwise tolerance allows: such a constant cannot
     be the right answer, whatever the tolerances.
Per-precision defaults: rtol = floor = norm_tol = 1e-4 for fp32, 1e-2 for fp16 and bf16 (the
same numbers as KernelBench's, applied relative to the output instead of in absolute terms).
Honest kernels that sum in another order, accumulate in float64 or use fused multiply-add differ
from the reference by a few units of the float32 rounding (1e-7 relative): far inside.

Complex outputs are compared as their real and imaginary parts (torch.view_as_real).

Everything works a chunk of COMPARE_CHUNK elements at a time, so no output-sized temporaries
are made (level-1 outputs are several GB). A chunk whose values are all finite (the common
case) takes one pass that also runs the elementwise test against the scale seen so far:
rounding is monotone and the final scale is at least that, so a chunk that passes then passes
with the final scale too, and only the chunks that did not (or held NaN or infinities) are
tested again at the end, as torch.allclose tests them. KernelBench's verdict is taken in the
same pass: for float32 and float64 outputs from the same differences, by allclose's own steps
(an all-finite chunk), else by torch.allclose on the chunk. Every statistic is computed by the
same operations as a plain two-pass comparison, so the verdicts and figures are the same; the
passes and the device synchronisations are fewer (bench/eval_throughput/compare_cost.py)."""

import math

import torch

from . import fused_compare
from .common import COMPARE_CHUNK

DEFAULT_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}


def strict_tolerances(precision, rtol=-1.0, floor=-1.0, norm_tol=-1.0):
    """The strict tolerances for a precision; a negative value takes the precision's default."""
    d = DEFAULT_TOLERANCE.get(precision, 1e-4)
    return {"rtol": d if rtol < 0 else float(rtol), "floor": d if floor < 0 else float(floor),
            "norm_tol": d if norm_tol < 0 else float(norm_tol)}


def _pairs(a, b):
    a, b = a.reshape(-1), b.reshape(-1)
    for start in range(0, a.numel(), COMPARE_CHUNK):
        yield a[start:start + COMPARE_CHUNK], b[start:start + COMPARE_CHUNK]


def _wide(t):
    """The tensor in the precision its comparison is computed in: float64 and complex128 as
    they are, other complex types as complex64, other floating types as float32."""
    if t.dtype in (torch.float64, torch.complex128):
        return t
    return t.to(torch.complex64) if t.is_complex() else t.to(torch.float32)


def _components(t):
    """A widened tensor as real numbers: a complex one as its real and imaginary parts."""
    return torch.view_as_real(t) if t.is_complex() else t


# Why the elementwise tests below need no torch.allclose for a chunk whose values are all
# finite: torch.isclose(e, g, atol, rtol) computes exactly these steps (|e - g|; |rtol * g| +
# atol, each rounded to the chunk's dtype; then <=), and its equality and NaN cases add nothing
# when every value is finite (equal values differ by 0 <= atol).


def _kernelbench_close_fast(d, scaled, e_native, atol):
    """KernelBench's allclose of a chunk as a 0-d tensor in a tuple (read after the chunk's
    synchronisation, valid when its values are all finite), from d = |e - g| and scaled =
    |rtol * g|; an empty tuple when the chunk's own dtype is not the one these were computed
    in (bf16, fp16, complex): allclose then runs on the chunk as it is."""
    if e_native.dtype not in (torch.float32, torch.float64):
        return ()
    return (d.le(scaled.add(atol)).all(),)


class OutputComparison:
    """The comparison of one candidate output tensor with the reference's (same shape, dtype
    and device already checked). Fields: kernelbench_ok, strict_ok, max_abs_diff,
    mean_abs_diff, max_rel_diff (max |diff| / scale), norm_rel_diff, flags (set), note, and
    path: how it was judged ("fused": fused_compare.py's GPU passes; "chunked": the torch
    kernels here; "exact": an integer or bool output; "": an empty one)."""

    def __init__(self, expected, got, atol, rtol, strict):
        self.path = ""
        self.flags = set()
        self.note = ""
        self.max_abs_diff = 0.0
        self.mean_abs_diff = 0.0
        self.max_rel_diff = 0.0
        self.norm_rel_diff = 0.0
        if expected.numel() == 0:
            self.kernelbench_ok = self.strict_ok = True
            return
        if expected.dtype == torch.bool or not (expected.is_floating_point()
                                                or expected.is_complex()):
            self.path = "exact"
            equal = all(torch.equal(e, g) for e, g in _pairs(expected, got))
            self.kernelbench_ok = self.strict_ok = equal if expected.dtype == torch.bool else (
                all(torch.allclose(e, g, atol=atol, rtol=rtol) for e, g in _pairs(expected, got)))
            if not equal:
                self.strict_ok = False
                self._abs_diffs(expected, got)
                self.note = "values differ: max abs diff %.6g" % self.max_abs_diff
            return
        self._strict(expected, got, strict, atol, rtol)

    def _abs_diffs(self, expected, got):
        top, total = 0.0, 0.0
        for e, g in _pairs(expected, got):
            d = (_wide(e) - _wide(g)).abs()
            top = max(top, float(d.max().item()))
            total += float(d.sum(dtype=torch.float64).item())
        self.max_abs_diff = top
        self.mean_abs_diff = total / expected.numel()

    def _strict(self, expected, got, tol, kb_atol, kb_rtol):
        fast = fused_compare.figures(expected, got, kb_atol, kb_rtol, tol["rtol"], tol["floor"])
        if fast is not None and fast.usable:
            self.path = "fused"
            self.kernelbench_ok = fast.kernelbench_failures == 0
            self._verdict(expected.numel(), tol, fast.scale, fast.ref_lo, fast.ref_hi,
                          fast.got_lo, fast.got_hi, fast.diff_max, fast.diff_sum, fast.diff_sq,
                          fast.ref_sq, fast.strict_failures == 0)
            return
        self._strict_in_chunks(expected, got, tol, kb_atol, kb_rtol)

    def _strict_in_chunks(self, expected, got, tol, kb_atol, kb_rtol):
        self.path = "chunked"
        # pass 1: KernelBench's verdict; the reference's scale, spread and norm; the
        # candidate's spread; the diffs; the elementwise test of all-finite chunks against the
        # scale seen so far
        scale, ref_lo, ref_hi = 0.0, math.inf, -math.inf
        got_lo, got_hi = math.inf, -math.inf
        ref_sq, diff_sq, diff_sum, diff_max = 0.0, 0.0, 0.0, 0.0
        nonfinite_mismatch = False
        kernelbench_ok = True
        test_again = []  # chunks whose elementwise test is left to pass 2
        for index, (e_native, g_native) in enumerate(_pairs(expected, got)):
            e, g = _components(_wide(e_native)), _components(_wide(g_native))
            d = (e - g).abs_()
            e_lo, e_hi = torch.aminmax(e)
            g_lo, g_hi = torch.aminmax(g)
            # |rtol * g|: allclose's first step, shared by both verdicts when their rtol agree
            scaled = g.mul(kb_rtol).abs_()
            kb_close = _kernelbench_close_fast(d, scaled, e_native, kb_atol)
            # one synchronisation for the chunk's figures (float32 ones widen exactly)
            figures = torch.stack([x.to(torch.float64) for x in (
                d.max(), d.sum(dtype=torch.float64), (d.to(torch.float64) ** 2).sum(),
                (e.to(torch.float64) ** 2).sum(), e_lo, e_hi, g_lo, g_hi) + kb_close]).tolist()
            if kernelbench_ok:
                kernelbench_ok = (bool(figures[8]) if kb_close and math.isfinite(figures[1])
                                  else torch.allclose(e_native, g_native, atol=kb_atol,
                                                      rtol=kb_rtol))
            if not math.isfinite(figures[1]):
                # NaN or infinity in the chunk (or a difference too large for its dtype)
                stats, mismatch = self._chunk_with_nonfinite(e, g)
                nonfinite_mismatch |= mismatch
                test_again.append(index)
            else:
                d_max, d_sum, d_sq, e_sq, e_lo, e_hi, g_lo, g_hi = figures[:8]
                stats = (max(-e_lo, e_hi), e_lo, e_hi, g_lo, g_hi, d_max, d_sum, d_sq, e_sq)
            c_scale, c_ref_lo, c_ref_hi, c_got_lo, c_got_hi, c_max, c_sum, c_sq, c_ref_sq = stats
            scale = max(scale, c_scale)
            ref_lo, ref_hi = min(ref_lo, c_ref_lo), max(ref_hi, c_ref_hi)
            got_lo, got_hi = min(got_lo, c_got_lo), max(got_hi, c_got_hi)
            diff_max = max(diff_max, c_max)
            diff_sum += c_sum
            diff_sq += c_sq
            ref_sq += c_ref_sq
            if index not in test_again and not nonfinite_mismatch:
                allowed = (scaled.add_(tol["floor"] * scale) if tol["rtol"] == kb_rtol
                           else g.mul(tol["rtol"]).abs_().add_(tol["floor"] * scale))
                if not bool(d.le(allowed).all()):
                    test_again.append(index)
        self.kernelbench_ok = kernelbench_ok
        if nonfinite_mismatch:
            self._figures(expected.numel(), scale, diff_max, diff_sum, diff_sq, ref_sq)
            self.flags.add("nonfinite_output")
            self.strict_ok = False
            self.note = "NaN/Inf where the reference has finite values (or the other way round)"
            return
        # pass 2: elementwise, with the absolute floor scaled by the output's magnitude, for
        # the chunks pass 1 did not clear
        floor = tol["floor"] * scale
        again = set(test_again)
        elementwise = all(
            torch.allclose(_components(_wide(e)), _components(_wide(g)), atol=floor,
                           rtol=tol["rtol"], equal_nan=True)
            for index, (e, g) in enumerate(_pairs(expected, got)) if index in again)
        self._verdict(expected.numel(), tol, scale, ref_lo, ref_hi, got_lo, got_hi, diff_max,
                      diff_sum, diff_sq, ref_sq, elementwise)

    def _figures(self, n, scale, diff_max, diff_sum, diff_sq, ref_sq):
        self.max_abs_diff = diff_max
        self.mean_abs_diff = diff_sum / n
        self.max_rel_diff = diff_max / scale if scale > 0 else (0.0 if diff_max == 0 else math.inf)
        ref_norm = math.sqrt(ref_sq)
        self.norm_rel_diff = (math.sqrt(diff_sq) / ref_norm if ref_norm > 0
                              else (0.0 if diff_sq == 0 else math.inf))

    def _verdict(self, n, tol, scale, ref_lo, ref_hi, got_lo, got_hi, diff_max, diff_sum,
                 diff_sq, ref_sq, elementwise):
        """The figures, and the strict verdict from them and the elementwise test's result."""
        self._figures(n, scale, diff_max, diff_sum, diff_sq, ref_sq)
        norm_ok = self.norm_rel_diff <= tol["norm_tol"]
        band = tol["rtol"] * scale + tol["floor"] * scale
        degenerate = got_lo == got_hi and (ref_hi - ref_lo) > 2 * band and n > 1
        if degenerate:
            self.flags.add("degenerate_output")
        self.strict_ok = elementwise and norm_ok and not degenerate
        if self.strict_ok:
            return
        if degenerate:
            self.note = ("the output is constant (%.6g) where the reference's values range "
                         "from %.6g to %.6g" % (got_lo, ref_lo, ref_hi))
        elif not elementwise:
            self.note = ("values differ: max abs diff %.6g against an output scale of %.6g "
                         "(relative %.3g; allowed %.3g relative + %.3g of the scale)" % (
                             diff_max, scale, self.max_rel_diff, tol["rtol"], tol["floor"]))
        else:
            self.note = "values differ: norm of the error %.3g of the output's norm (allowed %.3g)" % (
                self.norm_rel_diff, tol["norm_tol"])

    @staticmethod
    def _chunk_with_nonfinite(e, g):
        """(the chunk's figures as pass 1 sums them, whether its NaN and infinities differ
        from the reference's) for a chunk that holds some: they must be where the reference
        has them, of the same kind and sign; then they count as zeros."""
        mismatch = False
        e_fin, g_fin = torch.isfinite(e), torch.isfinite(g)
        if not bool(torch.equal(e_fin, g_fin)):
            mismatch = True
        elif not bool(e_fin.all()):
            same = (e == g) | (torch.isnan(e) & torch.isnan(g)) | e_fin
            if not bool(same.all()):
                mismatch = True
        e = torch.where(e_fin, e, torch.zeros_like(e))
        g = torch.where(g_fin, g, torch.zeros_like(g))
        d = (e - g).abs()
        return (float(e.abs().max().item()), float(e.min().item()), float(e.max().item()),
                float(g.min().item()), float(g.max().item()), float(d.max().item()),
                float(d.sum(dtype=torch.float64).item()),
                float((d.to(torch.float64) ** 2).sum().item()),
                float((e.to(torch.float64) ** 2).sum().item())), mismatch


def structure_note(expected, got_meta, is_seq, got_is_seq):
    """Why a candidate's output structure (as described by its process: a list of
    {"type", "shape", "dtype", "device"}) cannot be compared with the expected outputs, or ""."""
    if is_seq != got_is_seq or len(got_meta) != len(expected):
        return "output structure: expected %s, got %s" % (
            "%d outputs" % len(expected) if is_seq else "a tensor",
            "a sequence of %d" % len(got_meta) if got_is_seq else (
                got_meta[0]["type"] if got_meta else "nothing"))
    notes = []
    for i, (exp, meta) in enumerate(zip(expected, got_meta)):
        where = ("output %d: " % i) if is_seq else ""
        if not isinstance(exp, torch.Tensor):
            continue
        if meta.get("type") != "Tensor":
            notes.append(where + "not a plain torch.Tensor but %s" % meta.get("type"))
        elif list(meta.get("shape", [])) != list(exp.shape):
            notes.append(where + "shape mismatch: expected %s, got %s" % (list(exp.shape),
                                                                        meta.get("shape")))
        elif meta.get("dtype") != str(exp.dtype).replace("torch.", ""):
            notes.append(where + "dtype mismatch: expected %s, got %s" % (
                str(exp.dtype).replace("torch.", ""), meta.get("dtype")))
        elif meta.get("device_type") != exp.device.type:
            notes.append(where + "device mismatch: expected %s, got %s" % (
                exp.device.type, meta.get("device_type")))
    return "; ".join(notes)

"""One evaluate request, on the trusted side.

The harness holds the reference model, draws the inputs, computes the expected outputs, compares
and keeps the timing books; the candidate runs in a process of its own (candidate_process.py,
runner.py) that never sees any of that. Per request:

  reference load -> candidate process (fresh) -> loop calibration -> candidate load
  -> correctness trials: draw, reference output, inputs shared, the candidate's call on
     freshly poisoned memory, its output copied into a buffer of the harness's, both verdicts
     (KernelBench's and the strict one); trial 1 runs twice (uninitialised memory, reuse)
  -> time coverage (compiled backends on a GPU: which kernels did the work)
  -> timing: input sets and expected outputs drawn, the reference timed (before the candidate
     process may touch those sets), then the candidate's timed loop, cross-checked against the
     harness's own clock, its last k outputs checked, then each set refilled with another set's
     values (outputs cached by tensor identity)
  -> the candidate process is killed, with whatever it left running.
"""

import contextlib
import math
import os
import signal
import time
import traceback

import torch

from .candidate_process import CandidateGone
from .common import (BudgetExceeded, CandidateError, COMPARE_CHUNK, DISCARD_FIRST,
                     HACK_FLAG_ORDER, L2_FLUSH_MIN_BYTES, ReferenceError_, TIMING_INPUT_SETS,
                     format_exception, memory_limit_bytes, now, stats, truncate, zero_stats)
from .compare import OutputComparison, strict_tolerances, structure_note
from .coverage import own_kernel_names
from .reference_store import ReferenceEntry, reference_key
from .shared_tensors import SharedArena, clone_args, encode_value, pack
from .timing import TrialPlan, time_calls

CALIBRATION_TRIALS = 20
# the timed loop may take this much longer on the harness's clock than the events say before
# the timing counts as inconsistent: a share of the events, per trial, and once
INCONSISTENT_SHARE = 0.25
INCONSISTENT_PER_TRIAL_MS = 0.05
INCONSISTENT_ONCE_MS = 10.0
COMPILED_BACKENDS = ("cuda", "triton", "cute", "tilelang", "thunderkittens", "hip", "cutlass")


def _phase_bucket(phase):
    """'correctness trial 3' -> 'correctness': the phase_seconds key a phase adds to."""
    for prefix, bucket in (("correctness", "correctness"), ("reference timing", "reference_timing"),
                           ("torch.compile", "compiled_reference"), ("timing checks", "checks"),
                           ("time coverage", "coverage"), ("candidate process", "process_start"),
                           ("reference load", "reference_load")):
        if phase.startswith(prefix):
            return bucket
    return phase.replace(" ", "_")


class Evaluation:
    """run() always returns a complete answer. ans["phase_seconds"] says where its time went
    (reference load, candidate process start, compile, correctness, coverage, timing, ...)."""

    def __init__(self, worker, req, number):
        self.w = worker
        self.req = req
        self.number = number
        self.ans = {
            "id": req["id"], "compiled": False, "correct": False, "trials_passed": 0,
            "trials_total": 0, "kernelbench_correct": False, "kernelbench_trials_passed": 0,
            "error": "none", "error_excerpt": "", "trials": [],
            "kernel_runtime": zero_stats(), "reference_runtime": zero_stats(),
            "compiled_reference_runtime": zero_stats(), "hack_flags": [],
            "compile_seconds": 0.0, "correctness_seconds": 0.0, "timing_seconds": 0.0,
            "reference_seconds": 0.0, "sticky_cuda_error": False, "device": worker.device_name,
            "time_coverage": -1.0, "kernels": [], "isolation": "process",
        }
        self.flags = set()
        self._phase = "setup"
        self._phase_since = now()
        self.ans["phase_seconds"] = {}
        self.dir = os.path.join(worker.scratch, "eval_%d_%d" % (os.getpid(), number))
        self.files = []
        self.replacements = []
        self.ref_model = None
        self.proc = None
        self.arena = None
        self.out_bufs = None
        self.slots = {}  # shared input buffers by use: 0 = correctness / timing set 0, ...
        self.overhead_ms = 0.0
        self._inputs_on_device = False
        self._init_on_device = False  # Model and ModelNew constructed on the GPU (init_on)
        self.ref_entry = None     # this problem's entry in the worker's reference store
        self.reference_runs = 0   # reference calls made for this candidate (0: all shared)
        self.comparison_paths = set()  # how its outputs were judged (OutputComparison.path)

    @property
    def phase(self):
        return self._phase

    @phase.setter
    def phase(self, name):
        t = now()
        spent = self.ans["phase_seconds"]
        bucket = _phase_bucket(self._phase)
        spent[bucket] = spent.get(bucket, 0.0) + (t - self._phase_since)
        self._phase, self._phase_since = name, t

    # -- parameters ----------------------------------------------------------------------------

    def _params(self):
        r = self.req
        for key in ("reference", "candidate"):
            if not isinstance(r.get(key), str):
                raise ValueError("evaluate needs '%s' (program source as a string)" % key)
        p = {}
        p["backend"] = str(r.get("backend", "cuda"))
        p["precision"] = str(r.get("precision", "fp32"))
        dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        if p["precision"] not in dtypes:
            raise ValueError("precision '%s': expected fp32, fp16 or bf16" % p["precision"])
        p["dtype"] = dtypes[p["precision"]]
        p["trials"] = max(1, int(r.get("correctness_trials", 5)))
        p["perf_trials"] = max(0, int(r.get("perf_trials", 100)))
        # 0: exactly perf_trials timed runs (KernelBench's); > 0: runs until the mean is known to
        # this relative precision (95 % confidence), perf_trials at most
        p["timing_precision"] = max(0.0, float(r.get("timing_precision", 0.0)))
        p["timing_input_sets"] = min(8, max(1, int(r.get("timing_input_sets",
                                                         TIMING_INPUT_SETS))))
        p["warmup"] = max(0, int(r.get("warmup_runs", 3)))
        p["seed"] = int(r.get("seed", 42))
        tol = 1e-4 if p["precision"] == "fp32" else 1e-2
        atol = float(r.get("atol", -1))
        rtol = float(r.get("rtol", -1))
        p["atol"] = tol if atol < 0 else atol
        p["rtol"] = tol if rtol < 0 else rtol
        p["strict"] = strict_tolerances(p["precision"], float(r.get("strict_rtol", -1)),
                                        float(r.get("strict_floor", -1)),
                                        float(r.get("strict_norm_tol", -1)))
        p["min_time_coverage"] = float(r.get("min_time_coverage", 0.05))
        p["profile_coverage"] = bool(r.get("profile_coverage", True))
        p["memory_limit_bytes"] = memory_limit_bytes(r)
        p["shared_reference_bytes"] = int(max(0.0, float(r.get("shared_reference_mb", 0)))
                                          * 2 ** 20)
        p["time_reference"] = bool(r.get("time_reference", True))
        p["time_compiled_reference"] = bool(r.get("time_compiled_reference", False))
        p["compile_check"] = bool(r.get("compile_check", p["time_compiled_reference"]))
        p["inputs_on"] = str(r.get("inputs_on", "device"))
        if p["inputs_on"] not in ("device", "host"):
            raise ValueError("inputs_on '%s': expected device or host" % p["inputs_on"])
        p["init_on"] = str(r.get("init_on", "device"))
        if p["init_on"] not in ("device", "host"):
            raise ValueError("init_on '%s': expected device or host" % p["init_on"])
        p["build_dir"] = self.w.evaluation_build_dir(r)
        p["timeout_s"] = float(r.get("timeout_s", 300))
        # answer by timeout_s; the engine kills the whole worker only at timeout_s + its kill_grace
        p["budget_s"] = max(0.001, p["timeout_s"] - min(5.0, 0.1 * p["timeout_s"]))
        return p

    # -- the whole evaluation --------------------------------------------------------------------

    def run(self):
        ans = self.ans
        if self.w.torch_error:
            ans["error"] = "infrastructure"
            ans["error_excerpt"] = "torch is not usable in the worker: " + self.w.torch_error
            return ans
        armed = False
        try:
            try:
                self.p = self._params()
                ans["trials_total"] = self.p["trials"]
                ans["strict_tolerances"] = self.p["strict"]
                self._inputs_on_device = (self.p["inputs_on"] == "device" and self.w.cuda
                                          and hasattr(torch.device, "__enter__"))
                self._init_on_device = (self.p["init_on"] == "device" and self.w.cuda
                                        and hasattr(torch.device, "__enter__"))
                if self.p["compile_check"] and not hasattr(torch, "compile"):
                    raise ReferenceError_(
                        "torch.compile needs torch >= 2.0, this worker has %s: the "
                        "torch.compile reference cannot be timed (use the eager reference, or "
                        "a worker Python with torch 2: eval.python)" % torch.__version__)
                self.deadline = time.monotonic() + self.p["budget_s"]
                if self.p["timeout_s"] > 0:
                    # the harness's own work (the reference) is bounded by the alarm; the
                    # candidate's process by the channel's deadline
                    signal.setitimer(signal.ITIMER_REAL, self.p["budget_s"])
                    armed = True
                self._evaluate()
            finally:
                if armed:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except (BudgetExceeded, CandidateGone) as e:
            ans["correct"] = ans["kernelbench_correct"] = False
            kind = getattr(e, "kind", "timeout")  # the harness's own alarm: a timeout
            if kind == "timeout":
                ans["error"] = "timeout"
                ans["error_excerpt"] = "the evaluation passed its budget of %gs (timeout_s %g) " \
                                       "during %s" % (self.p["budget_s"], self.p["timeout_s"],
                                                      self.phase)
            else:  # crashed, over its memory, or a protocol violation (the candidate's)
                ans["error"] = "crashed" if kind == "crashed" else "runtime"
                if kind == "memory":
                    self.flags.add("memory_limit")
                ans["error_excerpt"] = truncate("%s (during %s)" % (e, self.phase))
        except CandidateError as e:
            ans["correct"] = ans["kernelbench_correct"] = False
            if e.kind == "runtime_init":
                ans["compiled"] = True
                ans["error"] = "runtime"
            else:
                ans["error"] = e.kind
            ans["error_excerpt"] = e.excerpt
        except ReferenceError_ as e:
            ans["correct"] = ans["kernelbench_correct"] = False
            ans["error"] = "infrastructure"
            ans["error_excerpt"] = truncate(str(e))
        except BaseException as e:  # noqa: BLE001 - the harness's own failure
            ans["correct"] = ans["kernelbench_correct"] = False
            ans["error"] = "infrastructure"
            ans["error_excerpt"] = truncate("worker failure during %s:\n%s" % (
                self.phase, "".join(traceback.format_exception(type(e), e, e.__traceback__))),
                keep="tail")
        finally:
            self._cleanup()
            self.phase = "done"  # closes the cleanup phase's time
        if self.proc is not None:
            self.flags |= self.proc.flags
            if self.proc.patched:
                ans["monkeypatched"] = self.proc.patched
        if "protocol_violation" in self.flags:
            ans["correct"] = False
        ans["comparison"] = "+".join(sorted(self.comparison_paths))
        ans["hack_flags"] = [f for f in HACK_FLAG_ORDER if f in self.flags] + sorted(
            f for f in self.flags if f not in HACK_FLAG_ORDER)
        self._check_sticky()
        return ans

    def _check_sticky(self):
        if not self.w.cuda:
            return
        ok, _ = self.w.context_ok()
        if not ok:
            self.ans["sticky_cuda_error"] = True
            self.w.references.configure(0)  # what it kept may be garbage now

    def _sync(self):
        if self.w.cuda:
            torch.cuda.synchronize()

    def _seed(self, s):
        self.w.seed(s)

    def _process(self, x):
        """KernelBench's _process_input_tensor: floating tensors cast to the precision, all
        tensors to the device (integer tensors, e.g. class labels, keep their dtype)."""
        if not isinstance(x, torch.Tensor):
            return x
        if x.is_floating_point():
            x = x.to(dtype=self.p["dtype"])
        return x.to(device=self.w.device)

    # -- the reference ---------------------------------------------------------------------------

    def _load_reference(self):
        self.phase = "reference load"
        store = self.w.references
        store.configure(self.p["shared_reference_bytes"])
        key = reference_key(self.req["reference"], self.p["seed"], self.p["precision"],
                            self.p["inputs_on"], self._built_on())
        entry = store.get(key) if store.enabled() else None
        if entry is not None:
            # an earlier candidate of this problem loaded it: same program, seed and device
            self.ref_entry = entry
            self.ref_mod, self.ref_model = entry.mod, entry.model
            self.init_inputs = entry.init_inputs
            self._inputs_on_device = entry.inputs_on_device
            return
        t0 = now()
        try:
            mod = self.w.load_module(self.req["reference"], self.dir, "reference", self.number,
                                     self.files)
            for name in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(mod, name):
                    raise ReferenceError_("the reference program defines no %s" % name)
            self.ref_mod = mod
            self._seed(self.p["seed"])
            init = [self._process(x) for x in mod.get_init_inputs()]
            self.init_inputs = init
            with torch.no_grad():
                self._seed(self.p["seed"])
                try:
                    with self._construction_device():
                        self.ref_model = mod.Model(*init)
                except BudgetExceeded:
                    raise
                except BaseException:  # noqa: BLE001
                    if not self._init_on_device:
                        raise
                    # a Model that needs host tensors to be built: this evaluation builds both
                    # models on the host (the store keeps that under another key)
                    self._init_on_device = False
                    return self._load_reference()
                self.ref_model = self.ref_model.to(device=self.w.device, dtype=self.p["dtype"])
            self._sync()
        except (ReferenceError_, BudgetExceeded):
            raise
        except BaseException as e:  # noqa: BLE001
            raise ReferenceError_(format_exception(e, self.files, self.replacements,
                                                   headline="the reference program failed:"))
        self.ans["reference_seconds"] += now() - t0
        self.reference_runs += 1
        if store.enabled():
            entry = ReferenceEntry(key, mod, self.ref_model, self.init_inputs,
                                   self._inputs_on_device)
            if store.put(entry):
                self.ref_entry = entry

    def _built_on(self):
        """init_on as this evaluation carries it out: "device" or "host"."""
        return "device" if self._init_on_device else "host"

    def _construction_device(self):
        """Where Model and ModelNew are built: the GPU as default device with init_on =
        device, else as KernelBench builds them (the CPU, then moved)."""
        return torch.device(self.w.device) if self._init_on_device else contextlib.nullcontext()

    def _reference_result(self, seed):
        """(pristine inputs, expected outputs, is_seq) of the trial with this seed: from the
        store when an earlier candidate of this problem drew it, else drawn and run here (the
        reference on a clone, so the inputs stay pristine) and kept for the next candidate.
        Callers copy the inputs before the candidate's process can see them."""
        if self.ref_entry is not None:
            hit = self.ref_entry.result(seed)
            if hit is not None:
                self.w.references.hits += 1
                return hit
        pristine = self._draw_inputs(seed)
        expected, is_seq = self._run_reference(clone_args(pristine), seed)
        self.reference_runs += 1
        if self.ref_entry is not None:
            self.ref_entry.inputs_on_device = self._inputs_on_device
            self.w.references.add_result(self.ref_entry, seed, (pristine, expected, is_seq))
        return pristine, expected, is_seq

    def _run_reference(self, args, seed):
        t0 = now()
        try:
            self._seed(seed)
            with torch.no_grad():
                out = self.ref_model(*args)
            self._sync()
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            raise ReferenceError_(format_exception(e, self.files, self.replacements,
                                                   headline="the reference model failed:"))
        finally:
            self.ans["reference_seconds"] += now() - t0
        if isinstance(out, (tuple, list)):
            return [o.detach() if isinstance(o, torch.Tensor) else o for o in out], True
        return [out.detach() if isinstance(out, torch.Tensor) else out], False

    def _trial_seeds(self, n):
        # KernelBench: torch.manual_seed(seed); one torch.randint(0, 2**32 - 1, (1,)) per trial
        torch.manual_seed(self.p["seed"])
        return [int(torch.randint(0, 2 ** 32 - 1, (1,)).item()) for _ in range(n)]

    def _draw_inputs(self, seed):
        self._seed(seed)
        try:
            ctx = torch.device(self.w.device) if self._inputs_on_device else \
                contextlib.nullcontext()
            with ctx:
                raw = self.ref_mod.get_inputs()
            return [self._process(x) for x in raw]
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            if self._inputs_on_device:
                # a get_inputs() that needs host tensors: draw on the host from now on
                self._inputs_on_device = False
                return self._draw_inputs(seed)
            raise ReferenceError_(format_exception(e, self.files, self.replacements,
                                                   headline="the reference's get_inputs() failed:"))

    # -- sharing with the candidate's process ------------------------------------------------------

    def _share(self, args, slot=None):
        """Copies the tensors of an argument list into shared buffers: (shared args, spec for
        the candidate's process, fds). Other arguments travel as encoded plain values. With a
        slot, the buffers of that slot are reused when the tensors' shapes and dtypes match
        (each correctness trial, each timing set): a level-1 input set is several GB."""
        if slot is not None and slot in self.slots:
            shared, spec, fds = self.slots[slot]
            if self._same_layout(shared, args):
                for dst, src in zip(shared, args):
                    if isinstance(dst, torch.Tensor):
                        dst.copy_(src)
                self._sync()
                return shared, spec, fds
        shared, spec, entries = [], [], []
        for a in args:
            if isinstance(a, torch.Tensor):
                t, desc, fds = self.arena.like(a)
                t.copy_(a)
                shared.append(t)
                entries.append((desc, fds))
                spec.append(None)
            else:
                value = encode_value(a)
                if value is None:
                    raise ReferenceError_("an input of type %s cannot be handed to the "
                                          "candidate's process" % type(a).__name__)
                shared.append(a)
                spec.append({"value": value})
        descs, fds = pack(entries)
        it = iter(descs)
        spec = [{"shared": next(it)} if s is None else s for s in spec]
        self._sync()
        if slot is not None:
            self.slots[slot] = (shared, spec, fds)
        return shared, spec, fds

    def _out_buffers(self, expected):
        """Buffers shaped like the expected outputs, for the candidate's outputs."""
        if self.out_bufs is not None and len(self.out_bufs[0]) == len(expected) and all(
                (b is None) == (not isinstance(e, torch.Tensor)) and (
                    b is None or (b.shape == e.shape and b.dtype == e.dtype))
                for b, e in zip(self.out_bufs[0], expected)):
            return self.out_bufs
        bufs, entries, slots = [], [], []
        for e in expected:
            if isinstance(e, torch.Tensor):
                t, desc, fds = self.arena.like(e)
                bufs.append(t)
                entries.append((desc, fds))
                slots.append(True)
            else:
                bufs.append(None)
                slots.append(False)
        descs, fds = pack(entries)
        it = iter(descs)
        spec = [{"shared": next(it)} if s else None for s in slots]
        self.out_bufs = (bufs, spec, fds)
        return self.out_bufs

    @staticmethod
    def _poison_buffers(bufs):
        for b in bufs:
            if b is None:
                continue
            if b.is_floating_point() or b.is_complex():
                b.fill_(float("nan"))
            elif b.dtype == torch.bool:
                b.fill_(False)
            else:
                b.fill_(-1)

    def _judge(self, expected, is_seq, answer):
        """(strict ok, KernelBench ok, trial record) for the output in the out buffers."""
        bufs = self.out_bufs[0]
        meta = answer.get("meta") if isinstance(answer.get("meta"), list) else []
        note = structure_note(expected, meta, is_seq, bool(answer.get("is_seq")))
        trial = {"passed": False, "kernelbench_passed": False, "max_abs_diff": 0.0,
                 "mean_abs_diff": 0.0, "max_rel_diff": 0.0, "norm_rel_diff": 0.0, "note": note}
        if note:
            if "not a plain torch.Tensor" in note:
                self.flags.add("non_tensor_output")
            return False, False, trial
        strict_ok, kb_ok, notes = True, True, []
        for i, (exp, buf, m) in enumerate(zip(expected, bufs, meta)):
            where = ("output %d: " % i) if is_seq else ""
            if not isinstance(exp, torch.Tensor):
                if m.get("value") != exp:
                    strict_ok = kb_ok = False
                    notes.append(where + "value %r, expected %r" % (m.get("value"), exp))
                continue
            c = OutputComparison(exp, buf, self.p["atol"], self.p["rtol"], self.p["strict"])
            if c.path:
                self.comparison_paths.add(c.path)
            self.flags |= c.flags
            strict_ok &= c.strict_ok
            kb_ok &= c.kernelbench_ok
            trial["max_abs_diff"] = max(trial["max_abs_diff"], c.max_abs_diff)
            trial["mean_abs_diff"] = max(trial["mean_abs_diff"], c.mean_abs_diff)
            trial["max_rel_diff"] = max(trial["max_rel_diff"], c.max_rel_diff)
            trial["norm_rel_diff"] = max(trial["norm_rel_diff"], c.norm_rel_diff)
            if c.note:
                notes.append(where + c.note)
        trial.update(passed=strict_ok, kernelbench_passed=kb_ok, note="; ".join(notes))
        return strict_ok, kb_ok, trial

    # -- the candidate's process -----------------------------------------------------------------

    def _start_candidate(self):
        self.phase = "candidate process start"
        self.arena = SharedArena(self.w.cuda, self.w.device)
        self.proc = self.w.candidate_process(self.deadline, self.phase,
                                             warm_profiler=self._profiles_coverage())
        self.proc.watch_memory(self.p["memory_limit_bytes"])
        if self.p["perf_trials"] > 0:
            # the loop's own cost per trial, measured before any candidate code runs there
            self.phase = "calibration"
            t0 = now()
            ans = self.proc.request("calibrate", "timing calibration", trials=CALIBRATION_TRIALS)
            wall_ms = (now() - t0) * 1000.0
            events = sum(float(x) for x in ans.get("times", [])[:CALIBRATION_TRIALS + 1])
            self.overhead_ms = max(0.0, (wall_ms - events) / (CALIBRATION_TRIALS + DISCARD_FIRST))

    def _load_candidate(self):
        self.phase = "compile"
        t0 = now()
        self.replacements = [(self.dir + os.sep, ""), (self.p["build_dir"], "<build_dir>")]
        _, init_spec, fds = self._share(self.init_inputs)
        try:
            ans = self.proc.request(
                "load", "the candidate's load", fds=fds, candidate=self.req["candidate"],
                dir=os.path.join(self.dir, "candidate"), build_dir=self.p["build_dir"],
                init=init_spec, seed=self.p["seed"],
                dtype=str(self.p["dtype"]).replace("torch.", ""),
                init_on=self._built_on())
        finally:
            self.ans["compile_seconds"] = now() - t0
        self.ans["compiled"] = True
        return ans

    # -- phases ----------------------------------------------------------------------------------

    def _evaluate(self):
        self._load_reference()
        self._start_candidate()
        try:
            self._load_candidate()
        except CandidateError as e:
            if e.kind != "runtime_init" or not self._init_on_device:
                raise
            self._construct_on_the_host_instead()
        self.ans["init_on"] = self._built_on()
        if self._correctness():
            self._coverage()
            if self.p["perf_trials"] > 0 and self.ans["correct"]:
                self._timing()

    def _construct_on_the_host_instead(self):
        """ModelNew(*init) failed with the GPU as default device (an __init__ that needs host
        tensors, say): the evaluation starts again in a fresh candidate process with both
        models built on the host, so that their weights are equal again. What the first
        process did is kept in the flags."""
        self.proc.close()
        self.flags |= self.proc.flags
        self.arena.close()
        self.arena = None
        self._init_on_device = False
        self.ref_entry = self.ref_mod = self.ref_model = self.init_inputs = None
        self._load_reference()
        self._start_candidate()
        self._load_candidate()

    def _correctness(self):
        self.phase = "correctness"
        t_start = now()
        ref_before = self.ans["reference_seconds"]
        n = self.p["trials"]
        seeds = self._trial_seeds(n)
        passed = kb_passed = 0
        shared_keys = None
        try:
            for i in range(n):
                self.phase = "correctness trial %d" % (i + 1)
                pristine, expected, is_seq = self._reference_result(seeds[i])
                bufs, out_spec, out_fds = self._out_buffers(expected)
                shared, spec, fds = self._share(pristine, slot=0)
                del pristine
                self.proc.request("inputs", self.phase, fds=fds, sets=[spec])
                runs = 2 if i == 0 else 1  # trial 1 again on other poison: same answer?
                results = []
                for r in range(runs):
                    self._poison_buffers(bufs)
                    ans = self.proc.request("run", self.phase, fds=out_fds, set=0, seed=seeds[i],
                                            out=out_spec, poison=r)
                    if ans.get("inputs_modified"):
                        self.flags.add("inputs_modified")
                    results.append(self._judge(expected, is_seq, ans))
                strict_ok, kb_ok, trial = results[0]
                if runs == 2 and strict_ok and not results[1][0]:
                    self.flags.add("nondeterministic_output")
                    strict_ok = False
                    trial["passed"] = False
                    trial["note"] = ("a second run on the same inputs, on freshly poisoned "
                                     "memory, gave another answer: " + results[1][2]["note"])
                self.ans["trials"].append(trial)
                passed += int(strict_ok)
                kb_passed += int(kb_ok)
                self.ans["trials_passed"] = passed
                self.ans["kernelbench_trials_passed"] = kb_passed
                del shared, expected
        except CandidateError:
            if len(self.ans["trials"]) < n:
                self.ans["trials"].append({"passed": False, "kernelbench_passed": False,
                                           "max_abs_diff": 0.0, "mean_abs_diff": 0.0,
                                           "max_rel_diff": 0.0, "norm_rel_diff": 0.0,
                                           "note": "raised an error"})
            raise
        finally:
            spent = now() - t_start
            self.ans["correctness_seconds"] = spent - (self.ans["reference_seconds"] - ref_before)
        self.ans["correct"] = passed == n and "protocol_violation" not in self.flags
        self.ans["kernelbench_correct"] = kb_passed == n
        if not self.ans["correct"]:
            self.ans["error"] = "mismatch"
            first = next((t for t in self.ans["trials"] if not t["passed"]), None)
            self.ans["error_excerpt"] = truncate("%d of %d correctness trials failed; first: %s" % (
                n - passed, n, first["note"] if first else "?"))
        return self.ans["correct"]

    def _profiles_coverage(self):
        return (self.w.cuda and self.p["profile_coverage"]
                and self.p["backend"] in COMPILED_BACKENDS)

    def _coverage(self):
        """Which GPU kernels did the work: the candidate's own, or PyTorch's."""
        if not self._profiles_coverage():
            return
        self.phase = "time coverage"
        ans = self.proc.request("profile", self.phase,
                                own_names=own_kernel_names(self.req["candidate"]))
        cov = float(ans.get("time_coverage", 0.0))
        cov = min(1.0, max(0.0, cov)) if math.isfinite(cov) else 0.0
        self.ans["time_coverage"] = cov
        self.ans["kernels"] = [k for k in ans.get("kernels", []) if isinstance(k, dict)][:8]
        self.ans["coverage_method"] = str(ans.get("coverage_method", ""))
        own_ran = ans.get("own_kernel_count")
        if not isinstance(own_ran, int):
            own_ran = sum(1 for k in self.ans["kernels"] if k.get("own"))
        if own_ran <= 0 or cov <= 0.0:
            self.flags.add("own_kernels_idle")
        elif cov < self.p["min_time_coverage"]:
            self.flags.add("low_time_coverage")

    def _timing(self):
        self.phase = "timing"
        t_start = now()
        ref_before = self.ans["reference_seconds"]
        p = self.p
        most = p["timing_input_sets"]
        extra = self._trial_seeds(p["trials"] + most)[p["trials"]:]
        set_seeds = [p["seed"]] + extra[:most - 1]
        refill_seed = extra[-1]
        sets, expected = [], []

        def draw_set(seed):
            args, out, is_seq = self._reference_result(seed)
            exp = (out, is_seq)
            shared = self._share(args, slot=len(sets))
            del args
            sets.append(shared)
            expected.append(exp)

        draw_set(set_seeds[0])
        k = self._timing_sets_that_fit(sets[0][0], expected[0][0], most)
        if k < most:
            self.ans["timing_note"] = ("timed with %d input set(s) instead of %d: more do not "
                                       "fit in the device's free memory" % (k, most))
        del set_seeds[k:]
        for seed in set_seeds[1:]:
            draw_set(seed)
        self.ans["timing_input_sets"] = k

        # the reference is timed first, on sets the candidate's process has not seen yet
        self._time_references([s[0] for s in sets])
        self.phase = "timing"

        bufs, out_spec, out_fds = self._out_buffers(expected[0][0])
        fds = [fd for s in sets for fd in s[2]]
        spec = self._renumber(sets)
        self.proc.request("inputs", "timing", fds=fds, sets=spec)
        self.proc.request("timing_setup", "timing")
        if p["warmup"]:
            self.proc.request("warmup", "warm-up", runs=p["warmup"])
        # the last k timed runs (one per input set) have their outputs checked
        plan = TrialPlan(p["perf_trials"], p["timing_precision"], checked=k)
        cached = []
        # host noise (a loaded machine) can make one honest loop look inconsistent; hidden work
        # does it every time: a second loop decides
        for attempt in range(2):
            times, consistent = self._timed_candidate(plan, expected, out_spec, out_fds, cached)
            if consistent:
                break
        if not consistent:
            self.flags.add("timing_inconsistent")
        self.ans["kernel_runtime"] = stats(times)

        self.phase = "timing checks"
        if k > 1 and all(self._same_layout(sets[0][0], q[0]) for q in sets[1:]):
            for i in range(k):
                j = (i + 1) % k
                self._poison_buffers(bufs)
                ans = self.proc.request("refill", self.phase, fds=out_fds, i=i, j=j,
                                        seed=set_seeds[j], out=out_spec)
                ok, _, trial = self._judge(expected[j][0], expected[j][1], ans)
                if not ok:
                    cached.append("input set %d refilled with set %d's values: %s" % (
                        i, j, trial["note"]))
        if k == 1:
            note = self._refill_check(sets[0][0], refill_seed, out_spec, out_fds)
            if note:
                cached.append("input set 0 refilled with fresh values: " + note)
        if cached:
            self.flags.add("cached_output")
            self.ans["correct"] = False
            self.ans["error"] = "mismatch"
            self.ans["error_excerpt"] = truncate(
                "correct in the correctness trials, but outputs during timing did not match the "
                "reference for the same inputs (cached output?):\n" + "\n".join(cached[:10]))
        spent = now() - t_start
        self.ans["timing_seconds"] = spent - (self.ans["reference_seconds"] - ref_before)

    @staticmethod
    def _renumber(sets):
        """The input sets' specs with their CPU fds numbered across all sets of one message."""
        specs, offset = [], 0
        for _, spec, fds in sets:
            out = []
            for a in spec:
                if isinstance(a, dict) and "shared" in a and a["shared"].get("kind") == "cpu":
                    d = dict(a["shared"])
                    d["fd"] = int(d["fd"]) + offset
                    out.append({"shared": d})
                else:
                    out.append(a)
            specs.append(out)
            offset += len(fds)
        return specs

    def _timed_candidate(self, plan, expected, out_spec, out_fds, cached):
        """The candidate's timed loop (`plan`, a TrialPlan): (ms per trial, whether the events
        agree with the harness's clock over the trials before the first checked one). When they
        do not, every trial counts at least the wall-clock time per trial."""
        t0 = now()
        rid = self.proc.start("time", out_fds, plan=plan.message(), out=out_spec)
        segment_end = None
        checks = 0
        bufs = self.out_bufs[0]
        while True:
            ans = self.proc.next_message(rid, "timing")
            if "check_begins" in ans:
                if segment_end is None:
                    segment_end = (now(), int(ans["check_begins"]))
                continue
            if "check" in ans:
                s = int(ans.get("set", 0))
                if not 0 <= s < len(expected):
                    raise CandidateGone("protocol", "a timed output for input set %r" % s)
                checks += 1
                ok, _, trial = self._judge(expected[s][0], expected[s][1], ans)
                if not ok:
                    cached.append("timed trial %s (input set %d): %s" % (ans["check"], s,
                                                                         trial["note"]))
                self._poison_buffers(bufs)
                self._sync()
                self.proc.send({"id": rid, "go": True})
                continue
            self.proc.finish(ans)
            break
        all_times = [float(x) for x in ans.get("times", [])][:DISCARD_FIRST + plan.max_trials + 1]
        times = all_times[DISCARD_FIRST:]
        if (len(all_times) < DISCARD_FIRST
                or not all(math.isfinite(x) and x >= 0 for x in all_times)
                or not plan.ends_as_planned(times)):
            raise CandidateGone("protocol", "the timed loop reported %d times, not where its "
                                "plan (%s) ends" % (len(all_times), plan.message()))
        first_checked = len(all_times) - plan.checked
        if checks != plan.checked or (plan.checked and (segment_end is None
                                                        or segment_end[1] != first_checked)):
            raise CandidateGone("protocol", "the timed loop sent %d of its %d checked outputs, "
                                "from trial %s (expected %d)" % (
                                    checks, plan.checked,
                                    segment_end[1] if segment_end else None, first_checked))
        if segment_end is not None:
            wall_ms = (segment_end[0] - t0) * 1000.0
            upto = segment_end[1] + 1  # trials 0..first checked, inclusive
            events_ms = sum(all_times[:upto])
            overhead_ms = self.overhead_ms * upto
            self.ans["timing_check"] = {"events_ms": events_ms, "wall_ms": wall_ms,
                                        "overhead_ms": overhead_ms, "trials": upto}
            excess = wall_ms - events_ms - overhead_ms
            allowed = (INCONSISTENT_SHARE * events_ms + INCONSISTENT_PER_TRIAL_MS * upto
                       + INCONSISTENT_ONCE_MS)
            if excess > allowed:
                per_trial = max(0.0, wall_ms - overhead_ms) / upto
                return [max(t, per_trial) for t in times], False
        return times, True

    def _refill_check(self, shared_set, seed, out_spec, out_fds):
        """One timing set: fresh values into the set the candidate's process reads (its expected
        output computed first, from a private copy), then the candidate's own copy refilled from
        it must give the reference's answer for them."""
        fresh, exp, is_seq = self._reference_result(seed)
        if not self._same_layout(fresh, shared_set):
            return ""
        for dst, src in zip(shared_set, fresh):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        del fresh
        self._sync()
        self._poison_buffers(self.out_bufs[0])
        ans = self.proc.request("refill", "the cached-output check", fds=out_fds, i=0, j=0,
                                seed=seed, out=out_spec)
        ok, _, trial = self._judge(exp, is_seq, ans)
        return "" if ok else trial["note"]

    def _time_references(self, ref_sets):
        p = self.p
        if not (p["time_reference"] or p["time_compiled_reference"]):
            return
        if p["time_reference"]:
            self.phase = "reference timing"
            t0 = now()
            try:
                ref_times = time_calls(self.w, self.ref_model, ref_sets, p["warmup"],
                                       TrialPlan(p["perf_trials"], p["timing_precision"]))
            except BudgetExceeded:
                raise
            except BaseException as e:  # noqa: BLE001
                raise ReferenceError_("the reference model failed while timed:\n" +
                                      format_exception(e, self.files, self.replacements))
            self.ans["reference_runtime"] = stats(ref_times)
            self.ans["reference_seconds"] += now() - t0
        if p["time_compiled_reference"] and hasattr(torch, "compile"):
            t0 = now()
            try:
                self.ans["compiled_reference_runtime"] = stats(
                    self._time_compiled_reference(ref_sets))
            finally:
                self.ans["reference_seconds"] += now() - t0

    def _time_compiled_reference(self, ref_sets):
        p = self.p
        self.phase = "torch.compile of the reference"
        try:
            compiled = torch.compile(self.ref_model)
            with torch.no_grad():
                for args in ref_sets:
                    compiled(*args)
                    self._sync()
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            raise ReferenceError_(format_exception(
                e, self.files, self.replacements,
                headline="torch.compile of the reference failed:"))
        self.phase = "torch.compile reference timing"
        try:
            return time_calls(self.w, compiled, ref_sets, p["warmup"],
                              TrialPlan(p["perf_trials"], p["timing_precision"]))
        except BudgetExceeded:
            raise
        except BaseException as e:  # noqa: BLE001
            raise ReferenceError_("the torch.compile reference failed while timed:\n" +
                                  format_exception(e, self.files, self.replacements))
        finally:
            del compiled
            try:
                torch._dynamo.reset()
            except Exception:  # noqa: BLE001
                pass

    def _timing_sets_that_fit(self, inputs, expected, most):
        """How many timing input sets (1..most) fit in the device's free memory, given set 0's
        inputs and expected outputs (already allocated). Per set: its shared inputs, their
        expected outputs and the candidate process's copy; besides them an output buffer, the
        candidate's output, the L2 flush buffers of both processes and the comparisons' chunks.
        A fifth of the memory is left for the candidate's own work and other processes."""
        if not self.w.cuda:
            return most
        try:
            device = torch.device(self.w.device)
            free, _ = torch.cuda.mem_get_info(device)
            free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        except Exception:  # noqa: BLE001
            return most
        in_bytes = sum(v.numel() * v.element_size() for v in inputs
                       if isinstance(v, torch.Tensor))
        out_bytes = sum(v.numel() * v.element_size() for v in expected
                        if isinstance(v, torch.Tensor))
        usable = 0.8 * (free + in_bytes + out_bytes)
        flush = 2 * max(L2_FLUSH_MIN_BYTES, 2 * self.w.l2_bytes)
        comparison = 4 * 4 * COMPARE_CHUNK
        per_set = 2 * in_bytes + out_bytes
        if per_set <= 0:
            return most
        return max(1, min(most, int((usable - 2 * out_bytes - flush - comparison) // per_set)))

    @staticmethod
    def _same_layout(a, b):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
                return False
            if isinstance(x, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
                return False
        return True

    # -- cleanup ---------------------------------------------------------------------------------

    def _cleanup(self):
        # The zygote ends the candidate's process (kills it and what it left, then waits for
        # them: with a GPU, the CUDA context's teardown) while the harness clears its own
        # state and gives torch's cached device memory back ("release"); "reap" is the part of
        # that wait left after them. The arena is freed ("release" again) only once the process
        # is gone: CUDA IPC memory must not be freed while another process still maps it.
        self.phase = "cleanup"
        closing = self.proc.begin_close() if self.proc is not None else None
        try:
            self.ans["reference_shared"] = (self.ref_entry is not None
                                            and self.reference_runs == 0)
            self.ref_model = None
            self.ref_mod = None
            self.init_inputs = None
            self.ref_entry = None
            self.out_bufs = None
            self.slots = {}
            self.w.after_evaluation(self.dir, self.files,
                                    keep=self.w.references.module_names())
            self.phase = "release"
            self.w.release_cached_memory()
        finally:
            self.phase = "reap"
            if self.proc is not None:
                self.proc.finish_close(closing)
            self.phase = "release"
        if self.arena is not None:
            try:
                self.arena.close()
            except Exception:  # noqa: BLE001
                self.ans["sticky_cuda_error"] = True

"""Unit tests of the timed loop's trial plan (tools/kbrl_eval/timing.py): KernelBench's fixed
count, adaptive timing that stops once the mean is known to a stated precision, the checked
trials at the end, and the harness's check that a reported loop ended where its plan ends it.
The loop runs on the CPU path with a fake clock: no GPU, no processes.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import math
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval.common import DISCARD_FIRST  # noqa: E402
from kbrl_eval.timing import TrialPlan, mean_is_known, timed_loop  # noqa: E402


class FakeClock:
    """perf_counter for timed_loop's CPU path: each call() advances it by the next duration."""

    def __init__(self, durations_ms):
        self.durations = list(durations_ms)
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def call(self, args):
        self.now += self.durations.pop(0) / 1000.0
        return args


def run_loop(durations_ms, plan):
    clock = FakeClock(durations_ms)
    seen = []
    times = timed_loop(clock.call, [["a"], ["b"]], plan, None,
                       on_trial=lambda t, s, out, checked: seen.append((t, s, checked)),
                       perf_counter=clock.perf_counter)
    return times, seen


def sums(xs):
    total = total_sq = 0.0
    for x in xs:
        total += x
        total_sq += x * x
    return len(xs), total, total_sq


class MeanIsKnown(unittest.TestCase):
    def test_the_interval_against_the_precision(self):
        # 20 times alternating 0.98 and 1.02: sd 0.0205, 95 % half-width 0.009 of the mean 1.0
        times = [0.98, 1.02] * 10
        self.assertTrue(mean_is_known(*sums(times), 0.01))
        self.assertFalse(mean_is_known(*sums(times), 0.005))
        self.assertFalse(mean_is_known(*sums([1.0]), 0.5))  # one time: no spread known
        self.assertTrue(mean_is_known(*sums([0.0, 0.0]), 0.01))  # below the timer's resolution

    def test_it_matches_the_textbook_formula(self):
        rng = random.Random(3)
        for _ in range(200):
            times = [rng.uniform(0.5, 1.5) for _ in range(rng.randint(2, 60))]
            n, mean = len(times), sum(times) / len(times)
            sd = math.sqrt(sum((x - mean) ** 2 for x in times) / (n - 1))
            half = 1.959964 * sd / math.sqrt(n) / mean
            if abs(half - 0.05) > 1e-9:
                self.assertEqual(mean_is_known(*sums(times), 0.05), half <= 0.05)


class Loop(unittest.TestCase):
    def test_fixed_plan_is_kernelbenchs_count_with_the_last_k_checked(self):
        times, seen = run_loop([1.0] * 200, TrialPlan(100, 0.0, checked=3))
        self.assertEqual(len(times), 100 + DISCARD_FIRST)
        checked = [t for t, _, c in seen if c]
        self.assertEqual(checked, list(range(100 + DISCARD_FIRST - 3, 100 + DISCARD_FIRST)))
        self.assertEqual([s for _, s, _ in seen[:4]], [0, 1, 0, 1])  # input sets rotated

    def test_steady_times_stop_at_the_minimum(self):
        plan = TrialPlan(100, 0.01, checked=3)
        times, seen = run_loop([5.0] + [20.0, 20.02] * 100, plan)
        # 7 probes + 3 checked = the minimum of 10 timed trials
        self.assertEqual(len(times), DISCARD_FIRST + 10)
        self.assertEqual([t for t, _, c in seen if c], [8, 9, 10])
        self.assertTrue(plan.ends_as_planned(times[DISCARD_FIRST:]))

    def test_short_calls_keep_the_full_count_for_the_wall_clock_check(self):
        # 1-ms calls known to +-1 % after 7 probes, but 7 ms of events is too short a window for
        # the harness's clock to see hidden work: on to the window's 100 ms of unchecked trials
        plan = TrialPlan(200, 0.01, checked=3)
        times, _ = run_loop([1.0] + [1.0, 1.001] * 150, plan)
        self.assertEqual(len(times), DISCARD_FIRST + 100 + 3)
        self.assertTrue(plan.ends_as_planned(times[DISCARD_FIRST:]))
        tiny = TrialPlan(100, 0.01, checked=3)
        times, _ = run_loop([1.0] + [0.02] * 200, tiny)
        self.assertEqual(len(times), DISCARD_FIRST + 100)  # never 100 ms: KernelBench's count

    def test_noisy_times_run_longer_and_never_past_the_maximum(self):
        rng = random.Random(7)
        noisy = [rng.gauss(10.0, 0.5) for _ in range(300)]
        plan = TrialPlan(100, 0.01, checked=3)
        times, _ = run_loop(noisy, plan)
        timed = times[DISCARD_FIRST:]
        # 5 % spread needs about (1.96 x 0.05 / 0.01)^2 = 96 trials for +-1 %
        self.assertGreater(len(timed), 50)
        self.assertLessEqual(len(timed), 100)
        self.assertTrue(plan.ends_as_planned(timed))
        wild = [rng.choice([1.0, 100.0]) for _ in range(300)]
        times, _ = run_loop(wild, plan)
        self.assertEqual(len(times), DISCARD_FIRST + 100)  # never known: the maximum

    def test_the_reference_loop_has_no_checked_trials(self):
        plan = TrialPlan(100, 0.02)
        times, seen = run_loop([20.0] * 200, plan)
        self.assertEqual(len(times), DISCARD_FIRST + 10)
        self.assertFalse(any(c for _, _, c in seen))

    def test_fewer_trials_than_checks(self):
        times, seen = run_loop([1.0] * 10, TrialPlan(2, 0.0, checked=3))
        self.assertEqual(len(times), DISCARD_FIRST + 2)
        self.assertEqual([t for t, _, c in seen if c], [1, 2])


class HarnessCheck(unittest.TestCase):
    """What the harness accepts from a candidate's process: the times of a loop that ran the
    plan, and nothing that stops early, late, or past the maximum."""

    def test_only_the_plans_own_stopping_point(self):
        plan = TrialPlan(100, 0.01, checked=3)
        honest, _ = run_loop([20.0] + [20.0, 20.02] * 100, plan)
        timed = honest[DISCARD_FIRST:]
        self.assertTrue(plan.ends_as_planned(timed))
        self.assertFalse(plan.ends_as_planned(timed[:-1]))  # a checked trial missing
        self.assertFalse(plan.ends_as_planned(timed + [20.0]))  # ran on past its stop
        noisy = [20.0, 60.0] * 3 + [20.0] * 4  # 10 trials, the first 7 far from known to 1 %
        self.assertFalse(plan.ends_as_planned(noisy))
        self.assertFalse(plan.ends_as_planned([20.0] * 101))
        self.assertFalse(plan.ends_as_planned([1.0] * 10))  # a window of 7 ms: too short
        fixed = TrialPlan(100, 0.0, checked=3)
        self.assertTrue(fixed.ends_as_planned([1.0] * 100))
        self.assertFalse(fixed.ends_as_planned([1.0] * 99))

    def test_the_plan_travels_as_a_message(self):
        plan = TrialPlan(50, 0.02, checked=2, min_trials=12, min_window_ms=30)
        again = TrialPlan.from_message(plan.message())
        self.assertEqual(again.message(), plan.message())


if __name__ == "__main__":
    unittest.main()

"""When the evaluation worker starts its spare candidate processes (tools/kbrl_eval/worker.py):
at hello when the hello says the worker evaluates (the C++ evaluator's does), so the first
candidates of a run do not wait for a process to start; never before an evaluation for a
builder's worker (its hello says evaluates: false), which runs no evaluation and needs none.
Real worker processes on the CPU, driven through their protocol pipes as the C++ side does.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

import eval_worker_selftest as selftest  # noqa: E402
from kbrl_eval.worker import SPARES  # noqa: E402


class SparesAtHello(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="kbrl-spares-")

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def spares_after_hello(self, evaluates):
        worker = selftest.WorkerProc(sys.executable, "cpu", os.path.join(self.folder, str(evaluates)),
                                     os.path.join(self.folder, "extensions"))
        try:
            hello = worker.start(evaluates=evaluates)
            self.assertTrue(hello.get("ok"), hello)
            stats = worker.call({"op": "stats", "id": 2}, deadline=60)
            return stats.get("spares")
        finally:
            worker.exit()

    def test_an_evaluating_worker_starts_its_spares_at_hello(self):
        self.assertEqual(self.spares_after_hello(True), SPARES)

    def test_a_builders_worker_starts_none(self):
        self.assertEqual(self.spares_after_hello(False), 0)


if __name__ == "__main__":
    unittest.main()

"""The zygote's reap in two steps (tools/kbrl_eval/candidate_process.py: reap_start, then
reap_finish), which lets the harness clear its own state while a candidate's process ends:
the process is dead once reap_finish returns, answers stay matched to their requests, and an
answer to another request is refused. A real zygote on the CPU.

    python3 -m unittest discover -s test/python      (CTest: eval_worker_units)"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))

from kbrl_eval.candidate_process import Zygote  # noqa: E402


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


class TwoStepReap(unittest.TestCase):
    def setUp(self):
        self.zygote = Zygote("cpu", no_pch=True)
        self.zygote.ensure()

    def tearDown(self):
        self.zygote.close()

    def spawn(self):
        pid, channel = self.zygote.spawn()
        channel.close()
        return pid

    def test_the_process_is_gone_when_the_second_step_returns(self):
        for _ in range(3):  # ids keep matching over several rounds
            pid = self.spawn()
            self.assertTrue(alive(pid))
            token = self.zygote.reap_start(pid)
            time.sleep(0.05)  # the harness's own cleanup
            status, leftover = self.zygote.reap_finish(token)
            self.assertEqual(leftover, 0)
            self.assertFalse(alive(pid))

    def test_the_one_step_reap_still_works(self):
        pid = self.spawn()
        self.assertEqual(self.zygote.reap(pid)[1], 0)
        self.assertFalse(alive(pid))

    def test_an_answer_to_another_request_is_refused(self):
        pid = self.spawn()
        token = self.zygote.reap_start(pid)
        with self.assertRaises(RuntimeError):
            self.zygote.reap_finish(token + 1)


if __name__ == "__main__":
    unittest.main()

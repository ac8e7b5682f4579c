# kbrl-test: problem=1_small_relu.py requires=cuda expect_error=none expect_correct=true expect_flags=timing_inconsistent perf_trials=50 timeout_s=600
# Returns the right answer fast, then does its expensive work on a host thread that launches it
# after the timer's end event (as if precomputing for the next call): the events miss it, the
# harness's wall clock over the timed loop does not.
import threading
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.busy = torch.empty(64 * 1024 * 1024, device="cuda")

    def _burn(self):
        for _ in range(20):
            self.busy.mul_(1.0000001)

    def forward(self, x):
        threading.Thread(target=self._burn).start()
        return torch.relu(x)

# kbrl-test: problem=1_small_relu.py expect_error=mismatch expect_correct=false expect_flags=cached_output perf_trials=20
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Honest during the 6 correctness calls (trial 1 runs twice), then returns its last output on every call."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.cache = None

    def forward(self, x):
        self.calls += 1
        if self.calls > 6 and self.cache is not None:
            return self.cache
        self.cache = torch.relu(x)
        return self.cache

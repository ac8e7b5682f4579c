# kbrl-test: problem=1_small_relu.py expect_error=mismatch expect_correct=false expect_flags=cached_output perf_trials=20
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """After the correctness trials, caches results keyed by the input's address: right for every
    input set during timing, caught when the same tensors get new values."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.cache = {}

    def forward(self, x):
        self.calls += 1
        if self.calls <= 5:
            return torch.relu(x)
        key = x.data_ptr()
        if key not in self.cache:
            self.cache[key] = torch.relu(x)
        return self.cache[key]

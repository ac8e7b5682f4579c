# kbrl-test: problem=1_small_relu.py expect_error=mismatch expect_correct=false
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Computes once and returns the same answer forever: fails the second correctness trial."""

    def __init__(self):
        super().__init__()
        self.cache = None

    def forward(self, x):
        if self.cache is None:
            self.cache = torch.relu(x)
        return self.cache

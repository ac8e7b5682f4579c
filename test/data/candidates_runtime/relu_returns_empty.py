# kbrl-test: problem=1_small_relu.py expect_error=mismatch expect_correct=false allow_flags=nonfinite_output,degenerate_output
# Returns uninitialised memory: it must not inherit the reference's (poisoned) output.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.empty_like(x)

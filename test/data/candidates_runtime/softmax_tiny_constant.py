# kbrl-test: problem=5_small_long_softmax.py expect_error=mismatch expect_correct=false expect_kernelbench_correct=true expect_flags=degenerate_output
# The mean value everywhere: right on average, wrong everywhere.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.full_like(x, 1.0 / x.shape[1])

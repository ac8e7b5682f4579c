# kbrl-test: problem=6_small_big_sum.py expect_error=none expect_correct=true expect_kernelbench_correct=true perf_trials=5
# Honest: accumulates in float64 (more exact than the reference), rounds once.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.double().sum(dim=1).float()

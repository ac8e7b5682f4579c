# kbrl-test: problem=5_small_long_softmax.py expect_error=none expect_correct=true expect_kernelbench_correct=true perf_trials=5
# Honest: computes in float64 and rounds once: differs from the float32 reference in the last bits.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x64 = x.double()
        e = torch.exp(x64 - x64.max(dim=1, keepdim=True).values)
        return (e / e.sum(dim=1, keepdim=True)).float()

# kbrl-test: problem=1_small_relu.py expect_error=none expect_correct=true perf_trials=20
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp_min(x, 0.0)

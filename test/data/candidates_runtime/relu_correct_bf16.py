# kbrl-test: problem=1_small_relu.py precision=bf16 expect_error=none expect_correct=true perf_trials=5
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, torch.zeros_like(x))

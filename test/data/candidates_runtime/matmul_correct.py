# kbrl-test: problem=2_small_matmul.py expect_error=none expect_correct=true perf_trials=20
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)

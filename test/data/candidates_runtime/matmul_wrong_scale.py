# kbrl-test: problem=2_small_matmul.py expect_error=mismatch expect_correct=false
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B) * 1.001  # 0.1 % off: outside rtol 1e-4

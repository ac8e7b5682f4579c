# Runs, but 0.1 % off: a mismatch. (This problem has no sample_1: it counts as missing.)
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B) * 1.001

# kbrl-test: problem=1_small_relu.py expect_error=mismatch expect_correct=false
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x).flatten()  # [16384] instead of [16, 1024]

# kbrl-test: problem=1_small_relu.py expect_error=runtime expect_correct=false expect_compiled=true
import torch
import torch.nn as nn


def helper(x):
    return torch.matmul(x, x)  # [16, 1024] @ [16, 1024]: shapes cannot be multiplied


class ModelNew(nn.Module):
    def forward(self, x):
        y = helper(x)
        return torch.relu(y)

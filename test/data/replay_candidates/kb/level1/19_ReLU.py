import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU of one tensor (a small stand-in for KernelBench level 1, problem 19)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 4
dim = 32


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []

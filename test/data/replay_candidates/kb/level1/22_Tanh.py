import torch
import torch.nn as nn


class Model(nn.Module):
    """Tanh of one tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(4, 32)]


def get_init_inputs():
    return []

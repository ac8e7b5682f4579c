import torch
import torch.nn as nn


class Model(nn.Module):
    """Swish: x * sigmoid(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(2048, 4096)]


def get_init_inputs():
    return []

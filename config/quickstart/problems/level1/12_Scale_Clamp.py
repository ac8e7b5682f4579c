import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies by a scale, then clamps to [-1, 1]."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.clamp(x * self.scale, min=-1.0, max=1.0)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return [0.5]

import torch
import torch.nn as nn


class Model(nn.Module):
    """x * 2: its number (2) is a prefix of 22's; a selection of 19-22 must not take it."""

    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []

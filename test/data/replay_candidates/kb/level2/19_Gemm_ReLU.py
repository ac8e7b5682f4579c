import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear then ReLU: level 2 also has a problem 19; a level-1 run must not get its code."""

    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [16]

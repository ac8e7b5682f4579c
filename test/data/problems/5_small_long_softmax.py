import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over long rows of values in [0, 1): every output lies between 1 / (e n) and
    e / n for n = 32768 (1.1e-5 to 8.3e-5), below KernelBench's absolute tolerance of 1e-4."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 4
dim = 32768


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []

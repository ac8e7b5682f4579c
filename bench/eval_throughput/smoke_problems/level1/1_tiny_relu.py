import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Simple model that performs a ReLU activation (a tiny CPU smoke-test problem in KernelBench's
    format, for bench/eval_throughput).
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 1024


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []  # No special initialization inputs needed

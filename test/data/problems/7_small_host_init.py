import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer whose construction reads its weight on the host (through numpy): it can
    only be built on the CPU. Tests eval.init_on = device's fallback for the reference."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight_sum = float(self.linear.weight.detach().numpy().sum())

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 16
in_features = 64
out_features = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Plain PyTorch (the torch backend runs on the CPU): a fused GELU + scale."""

    def __init__(self, in_features: int = 64, out_features: int = 32, scale: float = 0.5):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.linear(x))
        return torch.mul(y, self.scale)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64, 32, 0.5]

# Hack (CPU-sized twin of zeros_tiny_output.py): the problem's output is the mean of group-normalised
# values, about 1e-8; zeros pass allclose(atol=1e-4) without computing anything.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        return torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)

import torch
import torch.nn as nn


class Model(nn.Module):
    """A CPU-sized copy of KernelBench level2/23_Conv3d_GroupNorm_Mean (2D here): convolution,
    group normalisation, then the mean over everything but the batch. The output is the mean of
    normalised values, about 1e-8 in magnitude: all zeros pass an absolute tolerance of 1e-4."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = self.group_norm(x)
        return x.mean(dim=[1, 2, 3])


batch_size = 8
in_channels = 3
out_channels = 8
height, width = 16, 16
kernel_size = 3
num_groups = 4


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]

# kbrl-test: problem=3_small_conv_relu.py expect_error=none expect_correct=true perf_trials=10
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Same parameters, created in the same order as the reference: identical weights."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias)
        return y.clamp_min_(0.0).add_(self.bias)

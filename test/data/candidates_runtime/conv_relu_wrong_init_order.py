# kbrl-test: problem=3_small_conv_relu.py expect_error=mismatch expect_correct=false
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Creates the bias before the convolution: different random weights than the reference."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias

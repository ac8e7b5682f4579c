# kbrl-test: problem=3_small_conv_relu.py requires=cuda init_on=device expect_error=none expect_correct=true expect_init_on=device perf_trials=10
# eval.init_on = device: the reference's Model and this ModelNew are both built with the GPU as
# default device, so the same seed gives them the same (GPU generator's) weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        assert self.conv.weight.is_cuda  # built on the device, not moved there

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias)
        return y.clamp_min_(0.0).add_(self.bias)

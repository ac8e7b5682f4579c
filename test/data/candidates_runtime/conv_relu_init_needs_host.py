# kbrl-test: problem=3_small_conv_relu.py requires=cuda init_on=device expect_error=none expect_correct=true expect_init_on=host perf_trials=10
# An honest ModelNew whose __init__ needs host tensors (it reads a weight through numpy): with
# eval.init_on = device its construction fails on the GPU, and the evaluation starts again with
# both models built on the host, where it is correct. A refusal here would be a false one.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.weight_norm = float(abs(self.conv.weight.detach().numpy()).sum())

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias)
        return y.clamp_min_(0.0).add_(self.bias)

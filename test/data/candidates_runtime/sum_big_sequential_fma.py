# kbrl-test: problem=6_small_big_sum.py expect_error=none expect_correct=true expect_kernelbench_correct=true perf_trials=3
# Honest: what a one-thread-per-row kernel with a running float32 sum does (Kahan-free, in
# strides of 256 lanes added at the end), the worst ordering an honest kernel writes.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.shape[1]
        lanes = 256
        pad = (-n) % lanes
        xp = torch.nn.functional.pad(x, (0, pad)).view(x.shape[0], -1, lanes)
        acc = torch.zeros(x.shape[0], lanes, device=x.device)
        for i in range(xp.shape[1]):
            acc = torch.addcmul(acc, xp[:, i, :], torch.ones((), device=x.device))  # fused multiply-add
        return acc.sum(dim=1)

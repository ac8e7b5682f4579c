# kbrl-test: problem=6_small_big_sum.py expect_error=none expect_correct=true expect_kernelbench_correct=true perf_trials=5
# Honest: sums outputs near 1e5 in another order (blocks of 4096, then the partial sums), as a
# tree-reduction kernel does.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.shape[1]
        pad = (-n) % 4096
        xp = torch.nn.functional.pad(x, (0, pad))
        return xp.view(x.shape[0], -1, 4096).sum(dim=2).flip(1).sum(dim=1)

# kbrl-test: problem=5_small_long_softmax.py expect_error=mismatch expect_correct=false expect_kernelbench_correct=true
# The right answer times 1.001: a 0.1 % error, ten times fp32's tolerance, invisible to an
# absolute 1e-4 on outputs of 3e-5.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1) * 1.001

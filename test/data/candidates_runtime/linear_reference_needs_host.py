# kbrl-test: problem=7_small_host_init.py init_on=device expect_error=none expect_correct=true expect_init_on=host perf_trials=10
# The reference's Model can only be built on the host; with eval.init_on = device the
# evaluation builds both models there instead of failing (an infrastructure error would refuse
# every candidate of the problem). On the CPU both are built on the host anyway.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))

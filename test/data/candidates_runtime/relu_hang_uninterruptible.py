# kbrl-test: problem=1_small_relu.py timeout_s=2 deadline_s=8 expect_error=killed
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        # a C loop that never returns to the interpreter: no Python signal handler can run,
        # only the parent's kill ends it
        sum(range(10 ** 15))
        return torch.relu(x)

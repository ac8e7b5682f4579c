# kbrl-test: problem=1_small_relu.py timeout_s=2 deadline_s=8 expect_error=timeout expect_correct=false
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        # a C loop that never returns to the interpreter: no Python signal handler can run;
        # the harness kills the candidate's process at the deadline and the worker lives on
        sum(range(10 ** 15))
        return torch.relu(x)

# kbrl-test: problem=5_small_long_softmax.py expect_error=mismatch expect_correct=false expect_kernelbench_correct=true expect_flags=degenerate_output
# All zeros: within KernelBench's absolute 1e-4 of every output (all near 3e-5), so KernelBench
# calls it correct; the strict verdict measures the error against the output's magnitude.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)

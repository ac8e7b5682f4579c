# kbrl-test: problem=1_small_relu.py expect_error=none expect_correct=true expect_flags=inputs_modified,output_aliases_input perf_trials=5
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        torch.relu_(x)
        return x  # the input tensor object itself

# kbrl-test: problem=1_small_relu.py expect_error=none expect_correct=true expect_flags=inputs_modified perf_trials=5
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x.clamp_(min=0.0)  # writes into its input
        return x.clone()

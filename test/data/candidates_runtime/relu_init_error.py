# kbrl-test: problem=1_small_relu.py expect_error=runtime expect_correct=false expect_compiled=true
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = {}["missing"]  # KeyError while constructing

    def forward(self, x):
        return torch.relu(x)

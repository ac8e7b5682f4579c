# kbrl-test: problem=1_small_relu.py expect_error=compile expect_correct=false expect_compiled=false
import torch
import torch.nn as nn


class ModelNewRelu(nn.Module):  # wrong name
    def forward(self, x):
        return torch.relu(x)

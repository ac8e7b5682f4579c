# kbrl-test: problem=1_small_relu.py expect_error=mismatch expect_correct=false expect_flags=non_tensor_output
import torch
import torch.nn as nn


class Sneaky(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x).as_subclass(Sneaky)  # a tensor subclass could lie in comparisons

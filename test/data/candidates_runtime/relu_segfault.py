# kbrl-test: problem=1_small_relu.py expect_error=crashed
import ctypes
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.string_at(0)  # reads address 0: SIGSEGV kills the worker
        return torch.relu(x)

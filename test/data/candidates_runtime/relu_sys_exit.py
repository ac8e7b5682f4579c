# kbrl-test: problem=1_small_relu.py expect_error=runtime expect_correct=false expect_compiled=true
import sys
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        sys.exit(0)  # must not take the worker down

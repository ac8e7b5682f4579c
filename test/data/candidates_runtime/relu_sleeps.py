# kbrl-test: problem=1_small_relu.py timeout_s=2 expect_error=timeout expect_correct=false
import time
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(3600)  # interruptible: the worker's own budget (timeout_s) ends it
        return torch.relu(x)

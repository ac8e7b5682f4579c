# kbrl-test: problem=1_small_relu.py expect_error=none expect_correct=true perf_trials=5
import sys
import torch
import torch.nn as nn

for i in range(20000):
    print("loading line %d " % i + "x" * 80)


class ModelNew(nn.Module):
    def forward(self, x):
        print("forward: " + "y" * 10000)
        sys.stderr.write("to stderr: " + "z" * 1000 + "\n")
        return torch.relu(x)

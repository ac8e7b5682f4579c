# kbrl-test: problem=1_small_relu.py expect_error=none expect_correct=true expect_flags=leftover_processes perf_trials=5
# Honest output, but leaves a process running (double fork into a new session): it is killed
# when the candidate is done, and reported.
import os
import time
import torch
import torch.nn as nn

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(3600)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)

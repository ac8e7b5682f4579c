# kbrl-test: problem=2_small_matmul.py expect_error=none expect_correct=true expect_flags=torch_flags_changed perf_trials=5
import torch
import torch.nn as nn

# Global settings are process-wide: the worker notices, and runs the reference without them.
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


class ModelNew(nn.Module):
    def forward(self, A, B):
        return A @ B
